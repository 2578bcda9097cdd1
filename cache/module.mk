# cache: the LMDB sparse-range cache.
CACHE_SRCS := cache/cache.c cache/blocksum.c cache/envcheck.c cache/dirmode.c
$(BUILD)/libcache.a: $(CACHE_SRCS:%.c=$(BUILD)/%.o)

# The block-size benchmark: cache.c and bench.c built once per block size
# (make cache-bench, then run $(BUILD)/cache/bench_<bytes> [MiB] [dir]).
CACHE_BENCH_SIZES := 65536 262144 1048576

$(BUILD)/cache/bench-%/cache.o: cache/cache.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(PKG_CFLAGS) -DCACHE_BLOCK_SIZE=$*u -c $< -o $@

$(BUILD)/cache/bench-%/bench.o: cache/bench.c
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) $(PKG_CFLAGS) -DCACHE_BLOCK_SIZE=$*u -c $< -o $@

# The other sources do not depend on the block size.
$(BUILD)/cache/bench_%: $(BUILD)/cache/bench-%/bench.o $(BUILD)/cache/bench-%/cache.o \
		$(filter-out $(BUILD)/cache/cache.o,$(CACHE_SRCS:%.c=$(BUILD)/%.o))
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(shell $(PKG_CONFIG) --libs lmdb libcrypto libxxhash 2>/dev/null)

.PRECIOUS: $(BUILD)/cache/bench-%/cache.o $(BUILD)/cache/bench-%/bench.o
.PHONY: cache-bench
cache-bench: $(CACHE_BENCH_SIZES:%=$(BUILD)/cache/bench_%)
