"""The origins the bench starts on loopback: nginx (raw speed), the project's
pacefs-origin (latency, rate caps, faults, S3), and nginx as a caching
proxy in front of an origin (the cache tier of docs/deploy.md). Each
listens on a free port, its log in the work directory, and is tracked
for the cleanup.
"""
import os
import random
import socket
import subprocess
import time

from . import procs


def free_port():
    """A loopback TCP port nothing listens on right now."""
    for _ in range(200):
        port = random.randrange(20000, 60000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free port found")


NGINX_CONF = """{user}
daemon off;
master_process on;
worker_processes {workers};
pid {prefix}/nginx.pid;
error_log {prefix}/error.log {level};
events {{ worker_connections {conns}; }}
http {{
    default_type application/octet-stream;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 100000;
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    {log}
    {http}
    server {{ listen 127.0.0.1:{port}; {server} }}
}}
"""


def _nginx(b, name, server, http, workers, conns, level, log_format, probe):
    """Starts nginx in the folder NAME of the work directory; returns
    (proc, url, prefix)."""
    prefix = b.path(name)
    os.makedirs(os.path.join(prefix, "tmp"), exist_ok=True)
    if log_format:
        log = f"log_format t '{log_format}'; access_log {prefix}/access.log t;"
    else:
        log = "access_log off;"
    for _ in range(5):
        port = free_port()
        # Workers would otherwise drop to nobody and fail to read 0700 dirs.
        conf = NGINX_CONF.format(user="user root;" if os.getuid() == 0 else "",
                                 workers=workers, prefix=prefix, level=level,
                                 conns=conns, log=log, http=http.replace("@PREFIX@", prefix),
                                 port=port, server=server)
        with open(os.path.join(prefix, "nginx.conf"), "w") as f:
            f.write(conf)
        pidf = os.path.join(prefix, "nginx.pid")
        if os.path.exists(pidf):
            os.unlink(pidf)
        open(os.path.join(prefix, "access.log"), "a").close()
        with open(os.path.join(prefix, "nginx.out"), "a") as out:
            p = b.track.start("servers", ["/usr/sbin/nginx", "-e", f"{prefix}/error.log",
                                          "-p", prefix, "-c", f"{prefix}/nginx.conf"],
                              stdout=out, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        for _ in range(200):
            if probe(url, pidf, p):
                return p, url, prefix
            if p.poll() is not None:
                break
            time.sleep(0.05)
        procs.stop(p)
        b.track.forget("servers", p)
    with open(os.path.join(prefix, "error.log"), errors="replace") as f:
        tail = f.read().splitlines()[-3:]
    raise RuntimeError(f"nginx ({name}) did not start: {' / '.join(tail)}")


def _pid_written(url, pidf, p):
    # nginx writes its pid file once every listening socket is bound
    try:
        with open(pidf) as f:
            return f.read().strip() == str(p.pid)
    except OSError:
        return False


def nginx_start(b, name, server, log_format, http, workers, conns, level):
    from .runner import Origin
    p, url, prefix = _nginx(b, name, server, http, workers, conns, level, log_format, _pid_written)
    return Origin(url, os.path.join(prefix, "access.log"), p)


TIER_SERVER = """
    location = /__probe {{ return 204; }}
    location / {{
        slice {slice_k}k;
        proxy_cache pc;
        proxy_cache_key $http_host$uri$is_args$args$slice_range;
        proxy_set_header Range $slice_range;
        proxy_set_header Host $http_host;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_cache_valid 200 206 1h;
        proxy_cache_lock on;
        proxy_cache_lock_timeout 30s;
        proxy_cache_bypass $http_cache_control;
        proxy_pass http://$http_host;
        add_header X-Cache $upstream_cache_status;
    }}"""


def _probed(url, pidf, p):
    r = subprocess.run(["curl", "-s", "-o", "/dev/null", "--max-time", "2", url + "/__probe"])
    return r.returncode == 0


def tier_start(b, name, chunk):
    """nginx as a forward caching proxy (proxy_cache with the slice module,
    CHUNK a slice, an empty cache) in the work directory's folder NAME."""
    from .runner import Origin
    prefix = b.path(name)
    if os.path.exists(prefix):
        import shutil
        shutil.rmtree(prefix)
    os.makedirs(os.path.join(prefix, "cache"))
    http = (f"proxy_cache_path {prefix}/cache levels=1:2 keys_zone=pc:10m max_size=2g "
            "inactive=60m use_temp_path=off;")
    p, url, prefix = _nginx(b, name, TIER_SERVER.format(slice_k=chunk // 1024), http,
                            os.cpu_count(), 1024, "warn", None, _probed)
    return Origin(url, os.path.join(prefix, "access.log"), p)


def origin_start(b, name, args):
    """pacefs-origin on a free loopback port with ARGS; its request log
    ("method path range status bytes fault") in the work directory."""
    from .runner import Origin
    portf, log = b.path(name + ".port"), b.path(name + ".log")
    if os.path.exists(portf):
        os.unlink(portf)
    with open(b.path(name + ".out"), "w") as out, open(b.path(name + ".err"), "w") as err:
        p = b.track.start("servers", [b.origin_bin, "--port-file", portf, "--log", log, *args],
                          stdout=out, stderr=err)
    for _ in range(100):
        if os.path.exists(portf) and os.path.getsize(portf) > 0:
            with open(portf) as f:
                port = f.read().strip()
            return Origin(f"http://127.0.0.1:{port}", log, p)
        if p.poll() is not None:
            break
        time.sleep(0.05)
    procs.stop(p)
    b.track.forget("servers", p)
    with open(b.path(name + ".err"), errors="replace") as f:
        why = f.read().strip()
    raise RuntimeError(f"pacefs-origin {' '.join(args)} did not start: {why}")
