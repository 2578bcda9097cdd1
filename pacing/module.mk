# pacing: the pure scheduler; links nothing but the C library.
PACING_SRCS := pacing/pace.c pacing/lane.c pacing/source.c pacing/window.c \
	pacing/poll.c pacing/share.c pacing/demand.c pacing/cut.c \
	pacing/ranges.c pacing/ask.c pacing/fill.c pacing/hold.c
$(BUILD)/libpacing.a: $(PACING_SRCS:%.c=$(BUILD)/%.o)
