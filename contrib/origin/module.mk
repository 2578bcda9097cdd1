# contrib/origin: the project's own range-capable test origin with fault
# injection, used by the failure tests, the demo and the benchmarks.
ORIGIN_SRCS := contrib/origin/origin.c
$(BUILD)/pacefs-origin: $(ORIGIN_SRCS:%.c=$(BUILD)/%.o)
	$(CC) $(ALL_LDFLAGS) -o $@ $^
