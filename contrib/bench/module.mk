# contrib/bench: the benchmark's reader and file generator (make bench).
BENCH_TOOLS := $(BUILD)/bench/benchread

$(BUILD)/bench/benchread: $(BUILD)/contrib/bench/benchread.o
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^
