# tests/tools: small programs the mount tests use to compare bytes.
TEST_TOOLS := $(BUILD)/tests/readcmp

$(BUILD)/tests/readcmp: $(BUILD)/tests/tools/readcmp.o
	@mkdir -p $(dir $@)
	$(CC) $(ALL_LDFLAGS) -o $@ $^
