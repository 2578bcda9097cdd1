# tests/fuzz: libFuzzer targets for the parsers that read what a server or a
# user hands pacefs. `make fuzz` builds them with clang into $(BUILD)/fuzz/;
# tests/fuzz/run.sh SECONDS runs them. Not part of make check.
FUZZ_CC ?= clang
FUZZ_SAN := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 \
	-DFUSE_USE_VERSION=312 $(WARN) -g -O1 -I. -MMD -MP
FUZZ_OBJ := $(BUILD)/fuzz/obj
FUZZ_BINS := $(BUILD)/fuzz/fuzz_manifest $(BUILD)/fuzz/fuzz_dirindex \
	$(BUILD)/fuzz/fuzz_http $(BUILD)/fuzz/fuzz_name \
	$(BUILD)/fuzz/fuzz_headers $(BUILD)/fuzz/fuzz_url $(BUILD)/fuzz/fuzz_lmdb \
	$(BUILD)/fuzz/fuzz_s3xml $(BUILD)/fuzz/fuzz_awsconf \
	$(BUILD)/fuzz/fuzz_proxy

.PHONY: fuzz
fuzz: $(FUZZ_BINS)

# Library sources get the sanitizers and coverage but not libFuzzer's main.
$(FUZZ_OBJ)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) \
		$(if $(filter tests/fuzz/%,$<),$(FUZZ_SAN),$(subst fuzzer,fuzzer-no-link,$(FUZZ_SAN))) \
		$(PKG_CFLAGS) -c $< -o $@

$(BUILD)/fuzz/fuzz_manifest: $(FUZZ_OBJ)/tests/fuzz/fuzz_manifest.o \
		$(FUZZ_OBJ)/fs/tree/manifest.o $(FUZZ_OBJ)/fs/tree/mentry.o \
		$(FUZZ_OBJ)/fs/tree/mstream.o $(FUZZ_OBJ)/fs/tree/mfast.o \
		$(FUZZ_OBJ)/fs/decode.o \
		$(FUZZ_OBJ)/fs/errline.o $(FUZZ_OBJ)/fetch/url.o
	$(FUZZ_CC) $(FUZZ_SAN) -o $@ $^ \
		$(shell $(PKG_CONFIG) --libs jansson libcurl 2>/dev/null)

$(BUILD)/fuzz/fuzz_dirindex: $(FUZZ_OBJ)/tests/fuzz/fuzz_dirindex.o \
		$(FUZZ_OBJ)/fs/tree/dirindex.o $(FUZZ_OBJ)/fs/decode.o \
		$(FUZZ_OBJ)/fs/errline.o $(FUZZ_OBJ)/fetch/url.o
	$(FUZZ_CC) $(FUZZ_SAN) -o $@ $^ \
		$(shell $(PKG_CONFIG) --libs libcurl 2>/dev/null)

$(BUILD)/fuzz/fuzz_http: $(FUZZ_OBJ)/tests/fuzz/fuzz_http.o \
		$(FUZZ_OBJ)/fetch/http.o
	$(FUZZ_CC) $(FUZZ_SAN) -o $@ $^

$(BUILD)/fuzz/fuzz_name: $(FUZZ_OBJ)/tests/fuzz/fuzz_name.o \
		$(FUZZ_OBJ)/fs/cli/opts.o $(FUZZ_OBJ)/fs/auth/headers.o \
		$(FUZZ_OBJ)/fs/decode.o $(FUZZ_OBJ)/fs/errline.o \
		$(FUZZ_OBJ)/fetch/url.o $(FUZZ_OBJ)/fetch/proxy.o \
		$(FUZZ_OBJ)/fetch/http.o $(FUZZ_OBJ)/fs/obs/metrics_opt.o \
		$(FUZZ_OBJ)/fs/escape.o $(FUZZ_OBJ)/fs/cli/urlfile.o \
		$(FUZZ_OBJ)/fs/cli/values.o
	$(FUZZ_CC) $(FUZZ_SAN) -o $@ $^ \
		$(shell $(PKG_CONFIG) --libs fuse3 libcurl 2>/dev/null)

$(BUILD)/fuzz/fuzz_headers: $(FUZZ_OBJ)/tests/fuzz/fuzz_headers.o \
		$(FUZZ_OBJ)/fs/auth/headers.o $(FUZZ_OBJ)/fs/errline.o \
		$(FUZZ_OBJ)/fetch/url.o
	$(FUZZ_CC) $(FUZZ_SAN) -o $@ $^ \
		$(shell $(PKG_CONFIG) --libs libcurl 2>/dev/null)

$(BUILD)/fuzz/fuzz_url: $(FUZZ_OBJ)/tests/fuzz/fuzz_url.o \
		$(FUZZ_OBJ)/fetch/url.o
	$(FUZZ_CC) $(FUZZ_SAN) -o $@ $^ \
		$(shell $(PKG_CONFIG) --libs libcurl 2>/dev/null)

$(BUILD)/fuzz/fuzz_lmdb: $(FUZZ_OBJ)/tests/fuzz/fuzz_lmdb.o \
		$(FUZZ_OBJ)/cache/envcheck.o
	$(FUZZ_CC) $(FUZZ_SAN) -o $@ $^ \
		$(shell $(PKG_CONFIG) --libs lmdb 2>/dev/null)

$(BUILD)/fuzz/fuzz_s3xml: $(FUZZ_OBJ)/tests/fuzz/fuzz_s3xml.o \
		$(FUZZ_OBJ)/fs/tree/s3xml.o $(FUZZ_OBJ)/fs/decode.o \
		$(FUZZ_OBJ)/fs/errline.o \
		$(FUZZ_OBJ)/fetch/url.o
	$(FUZZ_CC) $(FUZZ_SAN) -o $@ $^ \
		$(shell $(PKG_CONFIG) --libs libxml-2.0 libcurl 2>/dev/null)

$(BUILD)/fuzz/fuzz_awsconf: $(FUZZ_OBJ)/tests/fuzz/fuzz_awsconf.o \
		$(FUZZ_OBJ)/fs/auth/awsconf.o $(FUZZ_OBJ)/fs/auth/headers.o \
		$(FUZZ_OBJ)/fs/errline.o $(FUZZ_OBJ)/fetch/url.o
	$(FUZZ_CC) $(FUZZ_SAN) -o $@ $^ \
		$(shell $(PKG_CONFIG) --libs libcurl 2>/dev/null)

$(BUILD)/fuzz/fuzz_proxy: $(FUZZ_OBJ)/tests/fuzz/fuzz_proxy.o \
		$(FUZZ_OBJ)/fetch/proxy.o $(FUZZ_OBJ)/fetch/url.o \
		$(FUZZ_OBJ)/fetch/http.o
	$(FUZZ_CC) $(FUZZ_SAN) -o $@ $^ \
		$(shell $(PKG_CONFIG) --libs libcurl 2>/dev/null)
