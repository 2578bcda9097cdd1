# cache: the LMDB sparse-range cache.
CACHE_SRCS := cache/cache.c
$(BUILD)/libcache.a: $(CACHE_SRCS:%.c=$(BUILD)/%.o)
