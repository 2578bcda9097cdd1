# cache: the LMDB sparse-range cache.
CACHE_SRCS := cache/env.c cache/writer.c cache/extent.c cache/evict.c \
	cache/read.c cache/verify.c cache/record.c cache/compact.c \
	cache/blocksum.c cache/envcheck.c cache/dirmode.c cache/buf.c \
	cache/regions.c
$(BUILD)/libcache.a: $(CACHE_SRCS:%.c=$(BUILD)/%.o)

# The block-size benchmark: every cache source and bench.c built once per
# block size (make cache-bench, then run $(BUILD)/cache/bench_<bytes> [MiB]
# [dir]).
CACHE_BENCH_SIZES := 65536 262144 1048576

define CACHE_BENCH_RULES
$(BUILD)/cache/bench-$(1)/%.o: cache/%.c
	@mkdir -p $$(dir $$@)
	$$(CC) $$(ALL_CFLAGS) $$(PKG_CFLAGS) -DCACHE_BLOCK_SIZE=$(1)u -c $$< -o $$@

$(BUILD)/cache/bench_$(1): $(BUILD)/cache/bench-$(1)/bench.o \
		$(CACHE_SRCS:cache/%.c=$(BUILD)/cache/bench-$(1)/%.o)
	$$(CC) $$(ALL_LDFLAGS) -o $$@ $$^ $$(shell $$(PKG_CONFIG) --libs lmdb libcrypto libxxhash 2>/dev/null)
endef
$(foreach s,$(CACHE_BENCH_SIZES),$(eval $(call CACHE_BENCH_RULES,$(s))))

.PHONY: cache-bench
cache-bench: $(CACHE_BENCH_SIZES:%=$(BUILD)/cache/bench_%)
