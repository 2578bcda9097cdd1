# fs: the FUSE driver, the glue between the modules, and the pacefs binary.
FS_SRCS := fs/fs.c fs/engine/engine.c fs/engine/blobs.c fs/engine/parts.c \
	fs/engine/transfers.c fs/engine/read.c fs/engine/verify.c fs/inval.c fs/mount.c fs/opts.c fs/log.c fs/ns.c fs/node.c fs/blob.c fs/status.c fs/manifest.c fs/dirindex.c fs/cachecmd.c fs/identity.c fs/headers.c \
	fs/creds.c fs/awsconf.c fs/s3.c fs/s3xml.c
$(BUILD)/libfs.a: $(FS_SRCS:%.c=$(BUILD)/%.o)

$(BUILD)/pacefs: $(BUILD)/fs/main.o $(BUILD)/libfs.a $(BUILD)/libfetch.a \
		$(BUILD)/libcache.a $(BUILD)/libpacing.a
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)
