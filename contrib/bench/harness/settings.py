"""The bench's knobs: sizes, rates and counts of every workload, for the full
run and for --quick (small data, one run: every workload in minutes), each
overridable from the environment where the shell harness let it be.

The names are the ones the shell harness wrote to settings.sh, so that a
report reads old and new results alike.
"""
import os

MiB = 1048576
FIO_ALL = "seq_read seq_read_4t rand_read rand_read_4t seq_read_skip_17m"

# name: (full, quick, environment variable or None, what it is)
KNOBS = {
    "SEQ_LO_SIZE": (256 * MiB, 64 * MiB, None, "loopback sequential, warm, remount; the player's, the tier's and s3sig's file"),
    "SEQ_WAN_SIZE": (64 * MiB, 16 * MiB, None, "WAN sequential, first byte, mirrors"),
    "SMALLBUF_SIZE": (128 * MiB, 16 * MiB, None, "WAN sequential from the small-buffer origin"),
    "SMALLBUF_SNDBUF": (32768, 32768, None, "that origin's SO_SNDBUF (as where lanes crawled)"),
    "SMALLBUF_CHUNK": (16384, 16384, None, "that origin's paced writes"),
    "LONG_SIZE": (128 * MiB, 32 * MiB, None, "random reads, seeks, positions"),
    "MULTI_SIZE": (32 * MiB, 8 * MiB, None, "each many-readers file"),
    "MULTI_FILES": (4, 4, None, "WAN many readers: files"),
    "MULTI_READERS": (8, 8, None, "WAN many readers: readers, two a file"),
    "MULTI_LO_N": ("4 16", "4 16", None, "loopback many readers: readers in one mount, each on its own file"),
    "MULTI_LO_FILES": (16, 16, None, "files for them: the largest of MULTI_LO_N"),
    "MEM_SIZE": (4096 * MiB, 512 * MiB, "BENCH_MEM_SIZE", "streamed while the daemon's RSS is read"),
    "SCALE_SIZES": ("100000 1000000 10000000", "100000 1000000", "BENCH_SCALE_SIZES", "entries of the scale workload's manifests (1,000 a directory)"),
    "SCALE_INDEX_FILES": (200000, 20000, "BENCH_SCALE_INDEX_FILES", "files of the scale workload's nginx autoindex tree (1,000 a directory), listed by ls -lR"),
    "WAN_RATE": (8000000, 8000000, None, "bytes/s a connection of the WAN-like origin"),
    "WAN_LATENCY": (20, 20, None, "ms before every response of the WAN-like origin"),
    "NEAR_RATE": (100000000, 100000000, None, "bytes/s a connection of the near origin (a loose cap: an object store in the reader's region)"),
    "NEAR_LATENCY": (2, 2, None, "ms before every response of the near origin"),
    "SEQ_NEAR_SIZE": (256 * MiB, 64 * MiB, None, "the near origin's cold sequential file (near.bin)"),
    "RANDOM_N_LO": (200, 50, None, "random 4 KiB reads on loopback"),
    "RANDOM_N_WAN": (100, 20, None, "random 4 KiB reads on the WAN origin"),
    "PLAYER_RATE": (4000000, 4000000, None, "the player's bytes/s"),
    "PLAYER_BYTES": (64 * MiB, 8 * MiB, None, "what it consumes (at most a quarter of SEQ_LO_SIZE)"),
    "PLAYER_BS": (256 * 1024, 256 * 1024, None, "its reads"),
    "SEEK_N": (6, 3, None, "seeks during a playback"),
    "SEEK_PLAY": (2 * MiB, MiB, None, "played at each position"),
    "SEEK_JUMP": (MiB, MiB, None, "seek1m's first read at each new position"),
    "PLAYER2_RATE": (2000000, 2000000, None, "the second player's bytes/s"),
    "PLAYER2_BYTES": (24 * MiB, 4 * MiB, None, "what it consumes"),
    "PLAYER_LEAD": (3, 3, "BENCH_LEAD", "s the player may pull ahead of what it consumed"),
    "LANES": (16, 16, None, "lanes pacefs may open to one origin (-o host_lanes=), for the seek target's bound"),
    "MEDIA_SECS": (300, 60, None, "the MP4: 640x360, 25 fps, H.264 + AAC"),
    "MEDIA_KBPS": (4000, 4000, None, "its video rate"),
    "PLAY_SECS": (10, 5, None, "ffmpeg -re plays this much of it"),
    "SS_POS": (150, 30, None, "ffmpeg -ss into the middle"),
    "PLAY_JUMPS": ("3:100 5:150 7:200", "2:20 3:30 4:40", None, "AT:POS: AT s into the playback, ffmpeg -ss POS"),
    "ZIP_MEMBERS": (100, 20, None, "stored members of the zip"),
    "ZIP_MEMBER_BYTES": (MiB, MiB, None, "each"),
    "ZIP_READ": ("m050.bin", "m010.bin", None, "the member in the middle"),
    "TAR_MEMBERS": (100, 20, None, "members of the tar archive"),
    "TAR_MEMBER_BYTES": (2 * MiB, MiB, None, "each (100 x 2 MiB: a 200 MiB archive)"),
    "TAR_READ": ("t050.bin", "t010.bin", None, "the member tar xOf extracts, in the middle"),
    "DB_ROWS": (262144, 16384, None, "rows of 1000 bytes on 4 KiB pages (262144: 257 MiB)"),
    "DB_PAYLOAD": (1000, 1000, None, "each row's blob"),
    "SQL_N": (50, 10, None, "point lookups"),
    "T1_RETRY_AFTER": (1, 1, None, "s, the one-transfer origin's Retry-After"),
    "STALL_SIZE": (4 * MiB, 4 * MiB, None, "the file behind the one-byte-per-response origin"),
    "READ_TIMEOUT": (5, 5, None, "pacefs -o read_timeout= against it"),
    "TIER_CHUNK": (MiB, MiB, None, "-o chunk= and the tier's slice"),
    "TIER_STALL": (10, 10, None, "s, -o stall_timeout= of the mount that loses a proxy"),
    "S3SIG_N": (2000, 200, None, "random 4 KiB reads of the s3sig workload"),
    "S3SIG_BUCKET": ("s3sig", "s3sig", None, "its bucket"),
    "LOADER_N": ("4 8 16", "8", "BENCH_LOADER_N", "the loader's worker counts"),
    "LOADER_SMALL_N": ("8", "8", "BENCH_LOADER_SMALL_N", "its worker counts over the small files"),
    "LOADER_ORIGINS": ("wan near lo", "wan near lo", "BENCH_LOADER_ORIGINS", "the loader's origins"),
    "LOADER_SETS": ("shards small", "shards small", "BENCH_LOADER_SETS", "its sets"),
    "SHARD_N": (48, 8, "BENCH_SHARDS", "shards"),
    "SHARD_SIZE": (8 * MiB, 2 * MiB, "BENCH_SHARD_SIZE", "each, bytes"),
    "SMALL_N": (2000, 100, "BENCH_SMALL_FILES", "small files"),
    "SMALL_SIZE": (32 * 1024, 32 * 1024, "BENCH_SMALL_SIZE", "each, bytes"),
    "PLAN_SMALL_N": ("8 1", "8 1", "BENCH_PLAN_N", "the plan workload's worker counts over the small files"),
    "PLAN_LANES": ("host_lanes=48,lanes=64", "host_lanes=48,lanes=64", None, "its wide-lanes row's pacefs options"),
    "PLAN_CURL_SMALL": (8, 8, None, "connections of its curl limit over the small files"),
    "PLAN_SHARD_WORKERS": (2, 2, None, "its workers over the shards"),
    "PLAN_CURL_SHARDS": (16, 16, None, "connections of its curl limit over the shards"),
    "PLAN_PAUSE_AFTER": (200, 20, None, "files the paused loader reads before its pause"),
    "PLAN_PAUSE_SECS": (10, 4, None, "its pause, seconds"),
    "PLAN_ABANDON_KEEP": (20, 10, None, "files read along a plan before it is abandoned"),
    "TORCH_WORKERS": (8, 8, None, "the PyTorch DataLoader's workers"),
    "TORCH_BATCH": (64, 8, None, "its batch size"),
    "FIO_JOBS": (FIO_ALL, FIO_ALL, "BENCH_FIO_JOBS", "mountpoint-s3's fio read jobs"),
    "FIO_ORIGINS": ("wan lo", "wan lo", "BENCH_FIO_ORIGINS", "their origins"),
    "FIO_SIZE": (1024 * MiB, 64 * MiB, "BENCH_FIO_SIZE", "their files, bytes (seq_read_skip_17m needs 256 MiB)"),
    "FIO_SECS": (10, 2, "BENCH_FIO_SECS", "each job's runtime"),
    "COG_SIZE": (16384, 4096, "BENCH_COG_SIZE", "the COG's width and height, UInt16 pixels (16384: about 540 MB)"),
    "H5_SIZE": (8192, 2048, "BENCH_H5_SIZE", "the HDF5 dataset's width and height, float32 (8192: about 143 MB)"),
    "SQFS_FILES": (8000, 2000, "BENCH_SQFS_FILES", "files of the library tree in the squashfs image (8000: about 35 MB)"),
    "SQFS_READ": (300, 100, "BENCH_SQFS_READ", "of them read whole, scattered"),
    "HOST_LANES": (16, 16, None, "pacefs's default -o host_lanes=, for the fio target's bound"),
}

# Steps' time limits, seconds.
TO_MOUNT = 30
TO_STEP = 240
TO_SHORT = 30   # steps that take seconds when all is well
TO_LOADER = 600  # a loader run: httpdirfs takes minutes over the small files


def make(quick):
    """The settings for a full or a quick run, with the environment's
    overrides; and the names of the knobs the environment changed."""
    out = {}
    changed = []
    for name, (full, small, env, _) in KNOBS.items():
        v = small if quick else full
        if env and os.environ.get(env):
            raw = os.environ[env]
            v = int(raw) if isinstance(full, int) else raw
            changed.append(env)
        out[name] = v
    return out, changed


def runs(quick):
    if os.environ.get("BENCH_RUNS"):
        return int(os.environ["BENCH_RUNS"])
    return 1 if quick else 3
