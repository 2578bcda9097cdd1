# tests: unit tests per module and the pacing simulator. Each test binary
# links only the libraries it tests; the pacing ones link libpacing alone,
# which proves the module is pure.
TEST_BINS := $(BUILD)/tests/test_pacing $(BUILD)/tests/test_cache \
	$(BUILD)/tests/test_fetch $(BUILD)/tests/test_fs $(BUILD)/tests/sim

$(BUILD)/tests/test_pacing: $(BUILD)/tests/unit/test_pacing.o $(BUILD)/libpacing.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^

# The fill and the price of a round trip, on a small link of its own.
TEST_BINS += $(BUILD)/tests/test_fill
$(BUILD)/tests/test_fill: $(BUILD)/tests/unit/test_fill.o $(BUILD)/libpacing.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^

# The simulator links libpacing alone; built straight from its sources so
# that no object folder is named like the binary. Its header is named here:
# the compiler's dependency file for several sources keeps the last one's.
SIM_SRCS := tests/sim/sim.c tests/sim/world.c tests/sim/scenarios.c \
	tests/sim/scatter.c tests/sim/streams.c tests/sim/plans.c
$(BUILD)/tests/sim: $(SIM_SRCS) tests/sim/sim_int.h $(BUILD)/libpacing.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $(filter-out %.h,$^)

$(BUILD)/tests/test_cache: $(BUILD)/tests/unit/test_cache.o $(BUILD)/libcache.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(shell $(PKG_CONFIG) --libs lmdb libcrypto libxxhash 2>/dev/null)

$(BUILD)/tests/test_fetch: $(BUILD)/tests/unit/test_fetch.o $(BUILD)/libfetch.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(shell $(PKG_CONFIG) --libs libcurl 2>/dev/null)

# The options' documents (docs/pacefs.1, README.md) are read from the
# source tree, from any working directory; the man page documents every
# metric too.
$(BUILD)/tests/unit/test_fs.o: ALL_CFLAGS += -DPACEFS_SRCDIR='"$(CURDIR)"'

$(BUILD)/tests/test_fs: $(BUILD)/tests/unit/test_fs.o $(BUILD)/libfs.a \
		$(BUILD)/libfetch.a $(BUILD)/libcache.a $(BUILD)/libpacing.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# obs/'s insides: the log's limiter and JSON lines, the metrics, the
# endpoint's connections; the man page is read from the source tree.
TEST_BINS += $(BUILD)/tests/test_obs
$(BUILD)/tests/unit/test_obs.o: ALL_CFLAGS += -DPACEFS_SRCDIR='"$(CURDIR)"'

$(BUILD)/tests/test_obs: $(BUILD)/tests/unit/test_obs.o $(BUILD)/libfs.a \
		$(BUILD)/libfetch.a $(BUILD)/libcache.a $(BUILD)/libpacing.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)

# The engine's blocks and drops from its insides, on an engine never
# started: linked as test_engine is, with no driver, tree or auth.
TEST_BINS += $(BUILD)/tests/test_blocks
$(BUILD)/tests/test_blocks: $(BUILD)/tests/unit/test_blocks.o \
		$(FS_ENGINE_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/libfetch.a \
		$(BUILD)/libcache.a $(BUILD)/libpacing.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(shell $(PKG_CONFIG) --libs libcurl lmdb libcrypto libxxhash 2>/dev/null)

# The engine without a mount, against a pacefs-origin it starts: linked
# with the engine's objects and the modules it joins alone (no libfuse),
# which proves it needs nothing of the driver, the tree or auth.
TEST_BINS += $(BUILD)/tests/test_engine
$(BUILD)/tests/test_engine: $(BUILD)/tests/unit/test_engine.o \
		$(FS_ENGINE_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/libfetch.a \
		$(BUILD)/libcache.a $(BUILD)/libpacing.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(shell $(PKG_CONFIG) --libs libcurl lmdb libcrypto libxxhash 2>/dev/null)

# The manifest and directory-index parsers; libfs.a needs the others.
TEST_BINS += $(BUILD)/tests/test_parse
# Its fixtures (tests/data) are found from any working directory.
$(BUILD)/tests/unit/test_parse.o: ALL_CFLAGS += -DPACEFS_SRCDIR='"$(CURDIR)"'

$(BUILD)/tests/test_parse: $(BUILD)/tests/unit/test_parse.o $(BUILD)/libfs.a \
		$(BUILD)/libfetch.a $(BUILD)/libcache.a $(BUILD)/libpacing.a
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(PKG_LIBS)
