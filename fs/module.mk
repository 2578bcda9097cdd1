# fs: the FUSE driver, the engine, the tree and the credentials (one
# folder each), and the pacefs binary; one library.
FS_ENGINE_SRCS := fs/engine/engine.c fs/engine/blobs.c fs/engine/blocks.c \
	fs/engine/transfers.c fs/engine/reads.c fs/engine/wholecheck.c \
	fs/engine/counters.c fs/engine/regions.c fs/engine/streamnote.c \
	fs/engine/openend.c fs/engine/streamhold.c
FS_TREE_SRCS := fs/tree/ns.c fs/tree/manifest.c fs/tree/mentry.c \
	fs/tree/dirindex.c fs/tree/s3.c fs/tree/s3xml.c fs/tree/usage.c \
	fs/tree/mstream.c fs/tree/nsurl.c fs/tree/mfast.c
FS_AUTH_SRCS := fs/auth/creds.c fs/auth/command.c fs/auth/awsconf.c \
	fs/auth/headers.c fs/auth/identity.c
FS_DRIVER_SRCS := fs/driver/mount.c fs/driver/check.c \
	fs/driver/prepare.c fs/driver/serve.c fs/driver/fs.c fs/driver/node.c \
	fs/driver/sizes.c fs/driver/learn.c fs/driver/inval.c \
	fs/driver/exitguard.c fs/driver/plan.c fs/driver/planahead.c \
	fs/driver/listorder.c fs/driver/plansock.c
FS_CLI_SRCS := fs/cli/opts.c fs/cli/scrub.c fs/cli/urlfile.c \
	fs/cli/clearproxy.c fs/cli/cachecmd.c fs/cli/regionscmd.c \
	fs/cli/statuscmd.c fs/cli/values.c fs/cli/plancmd.c
FS_OBS_SRCS := fs/obs/log.c fs/obs/logjson.c fs/obs/metrics.c \
	fs/obs/metrics_opt.c fs/obs/metricsd.c fs/obs/metricsconn.c \
	fs/obs/status.c fs/obs/text.c
FS_SRCS := fs/escape.c fs/decode.c fs/errline.c $(FS_DRIVER_SRCS) \
	$(FS_CLI_SRCS) $(FS_OBS_SRCS) $(FS_ENGINE_SRCS) $(FS_TREE_SRCS) $(FS_AUTH_SRCS)
$(BUILD)/libfs.a: $(FS_SRCS:%.c=$(BUILD)/%.o)

$(BUILD)/pacefs: $(BUILD)/fs/driver/main.o $(BUILD)/libfs.a $(BUILD)/libfetch.a \
		$(BUILD)/libcache.a $(BUILD)/libpacing.a
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)
