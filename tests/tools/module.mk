# tests/tools: small programs the mount tests use to compare bytes, to
# interrupt reads, to time stats, to drive fetch/ against a live origin and
# to read under the soak.
TEST_TOOLS := $(BUILD)/tests/readcmp $(BUILD)/tests/intread \
	$(BUILD)/tests/fetchq $(BUILD)/tests/statlat $(BUILD)/tests/soakread

$(BUILD)/tests/readcmp: $(BUILD)/tests/tools/readcmp.o
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^

$(BUILD)/tests/statlat: $(BUILD)/tests/tools/statlat.o
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^

# The soak's readers (tests/soak/soak.sh).
$(BUILD)/tests/soakread: $(BUILD)/tests/tools/soakread.o
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ -lpthread

$(BUILD)/tests/intread: $(BUILD)/tests/tools/intread.o
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^

$(BUILD)/tests/fetchq: $(BUILD)/tests/tools/fetchq.o $(BUILD)/libfetch.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(shell $(PKG_CONFIG) --libs libcurl 2>/dev/null) -lpthread

# Not part of make check: an LD_PRELOAD library for counting locks
# (docs/fs-notes.md).
$(BUILD)/tests/lockcount.so: tests/tools/lockcount.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 $(WARN) -O2 -fPIC -shared -o $@ $< -ldl

# Not part of make check: what a manifest's tree costs, step by step
# (docs/fs-notes.md, "What a tree entry costs").
$(BUILD)/tests/treecost: $(BUILD)/tests/tools/treecost.o $(BUILD)/libfs.a \
		$(BUILD)/libfetch.a $(BUILD)/libcache.a $(BUILD)/libpacing.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)
