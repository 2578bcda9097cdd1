# pacing: the pure scheduler; links nothing but the C library.
PACING_SRCS := pacing/pace.c pacing/ranges.c
$(BUILD)/libpacing.a: $(PACING_SRCS:%.c=$(BUILD)/%.o)
