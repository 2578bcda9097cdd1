# contrib/origin: the project's own range-capable test origin with fault
# injection, used by the failure tests, the demo and the benchmarks; s3.c is
# its S3 mode.
ORIGIN_SRCS := contrib/origin/origin.c contrib/origin/conn.c \
	contrib/origin/http.c contrib/origin/serve.c contrib/origin/send.c \
	contrib/origin/fault.c contrib/origin/listing.c contrib/origin/require.c \
	contrib/origin/log.c contrib/origin/s3.c
$(BUILD)/pacefs-origin: $(ORIGIN_SRCS:%.c=$(BUILD)/%.o)
	$(CC) $(ALL_LDFLAGS) -o $@ $^

# The S3 mode's signature check, found from wherever the origin runs.
$(BUILD)/contrib/origin/origin.o: ALL_CFLAGS += \
	-DORIGIN_S3VERIFY='"$(CURDIR)/contrib/origin/s3verify.py"'
