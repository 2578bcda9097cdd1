# tests/tools: small programs the mount tests use to compare bytes and to
# interrupt reads.
TEST_TOOLS := $(BUILD)/tests/readcmp $(BUILD)/tests/intread

$(BUILD)/tests/readcmp: $(BUILD)/tests/tools/readcmp.o
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^

$(BUILD)/tests/intread: $(BUILD)/tests/tools/intread.o
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^
