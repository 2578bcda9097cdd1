#!/usr/bin/env python3
"""asyncorigin: a small Python asyncio HTTP/1.1 origin, the kind that made
pacefs's lanes crawl (docs/pacing.md): a latency before every response, a
per-connection rate cap reached by small paced writes, and small socket send
buffers. It serves the files of --root with Range (206, Content-Range, 416),
ETag, Last-Modified and keep-alive, and logs one line per request in
pacefs-origin's format: `method path range status body-bytes-sent fault`.

Standard library only. Loopback only, like pacefs-origin.
"""

import argparse
import asyncio
import email.utils
import html
import http
import os
import signal
import socket
import sys
import time
import urllib.parse


def now():
    """The Date header's value."""
    return email.utils.formatdate(usegmt=True)


def parse_size(text):
    """Bytes with an optional K, M or G suffix (powers of 1024)."""
    mult = 1
    if text and text[-1] in "kKmMgG":
        mult = 1024 ** ("kmg".index(text[-1].lower()) + 1)
        text = text[:-1]
    return int(text) * mult


class Origin:
    def __init__(self, args):
        self.root = os.path.realpath(args.root)
        self.latency = args.latency / 1000.0
        self.rate = args.rate
        self.sndbuf = args.sndbuf
        self.chunk = args.write_chunk
        self.autoindex = args.autoindex
        self.log = open(args.log, "a", buffering=1) if args.log else None
        self.quiet = args.quiet
        self.one_at_a_time = args.one_at_a_time
        self.sending = 0  # response bodies being written now

    def log_line(self, method, target, rng, status, sent):
        if self.log is None and self.quiet:
            return
        rng = "".join((rng or "-").split()) or "-"
        line = f"{method or '-'} {target or '-'} {rng} {status} {sent} -\n"
        if self.log is not None:
            self.log.write(line)
        else:
            sys.stderr.write(line)

    def resolve(self, target):
        """The real path a target names under the root, or None."""
        path = urllib.parse.unquote(target.split("?", 1)[0])
        if not path.startswith("/") or "\0" in path:
            return None
        if any(seg == ".." for seg in path.split("/")):
            return None
        real = os.path.realpath(os.path.join(self.root, path.lstrip("/")))
        if real != self.root and not real.startswith(self.root + os.sep):
            return None
        return real

    async def handle(self, reader, writer):
        sock = writer.get_extra_info("socket")
        if self.sndbuf and sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.sndbuf)
        if self.chunk:
            # Keep asyncio's own buffer no bigger than one paced write, so
            # that the pace is set by the socket's drain, as in the report.
            writer.transport.set_write_buffer_limits(high=self.chunk)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if not await self.respond(head, writer):
                    break
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ConnectionError):
            pass
        finally:
            writer.close()

    async def respond(self, head, writer):
        """Answers one request; returns whether the connection stays open."""
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, version = lines[0].split(" ")
        except ValueError:
            await self.send_status(writer, None, None, None, 400, True)
            return False
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                name, value = line.split(":", 1)
                headers[name.strip().lower()] = value.strip()
        conn = headers.get("connection", "").lower()
        closing = conn == "close" or (version == "HTTP/1.0"
                                      and conn != "keep-alive")
        rng = headers.get("range")
        # --one-at-a-time: a request that arrives while another response's
        # body is being written is refused after the latency, with an empty
        # body and the connection kept.
        refused = self.one_at_a_time and self.sending > 0
        await asyncio.sleep(self.latency)
        if refused:
            writer.write((f"HTTP/1.1 503 Service Unavailable\r\n"
                          f"Server: asyncorigin\r\nDate: {now()}\r\n"
                          f"Retry-After: 1\r\nContent-Length: 0\r\n"
                          + ("Connection: close\r\n" if closing else "")
                          + "\r\n").encode())
            await writer.drain()
            self.log_line(method, target, rng, 503, 0)
            return not closing
        if method not in ("GET", "HEAD"):
            await self.send_status(writer, method, target, rng, 405, closing)
            return not closing
        path = self.resolve(target)
        if path and os.path.isdir(path) and self.autoindex \
                and target.split("?")[0].endswith("/"):
            await self.send_index(writer, method, target, path, closing)
            return not closing
        if not path or not os.path.isfile(path):
            await self.send_status(writer, method, target, rng, 404, closing)
            return not closing
        await self.send_file(writer, method, target, rng, headers, path,
                             closing)
        return not closing

    async def send_status(self, writer, method, target, rng, status, closing):
        body = f"{status}\n".encode()
        extra = "Connection: close\r\n" if closing else ""
        writer.write(
            (f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\n"
             f"Server: asyncorigin\r\nDate: {now()}\r\n"
             f"Content-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
             f"{extra}\r\n").encode() + (b"" if method == "HEAD" else body))
        await writer.drain()
        self.log_line(method, target, rng, status,
                      0 if method == "HEAD" else len(body))

    async def send_index(self, writer, method, target, path, closing):
        rows = []
        for name in sorted(os.listdir(path)):
            full = os.path.join(path, name)
            st = os.stat(full)
            slash = "/" if os.path.isdir(full) else ""
            date = time.strftime("%d-%b-%Y %H:%M", time.gmtime(st.st_mtime))
            size = "-" if slash else str(st.st_size)
            href = urllib.parse.quote(name) + slash
            rows.append(f'<a href="{href}">{html.escape(name)}{slash}</a>'
                        f"  {date}  {size}")
        body = ("<html><head><title>Index of {0}</title></head><body>"
                "<h1>Index of {0}</h1><hr><pre>"
                '<a href="../">../</a>\n{1}\n</pre><hr></body></html>\n'
                ).format(html.escape(target), "\n".join(rows)).encode()
        extra = "Connection: close\r\n" if closing else ""
        writer.write(
            (f"HTTP/1.1 200 OK\r\n"
             f"Server: asyncorigin\r\nDate: {now()}\r\n"
             f"Content-Type: text/html\r\nContent-Length: {len(body)}\r\n"
             f"{extra}\r\n").encode() + (b"" if method == "HEAD" else body))
        await writer.drain()
        self.log_line(method, target, None, 200,
                      0 if method == "HEAD" else len(body))

    @staticmethod
    def parse_range(rng, size):
        """(start, end) inclusive, "416", or None for the whole file."""
        if not rng or not rng.startswith("bytes=") or "," in rng:
            return None
        first, _, last = rng[6:].strip().partition("-")
        try:
            if first == "":
                n = int(last)
                if n == 0:
                    return "416"
                return (max(0, size - n), size - 1)
            start = int(first)
            end = int(last) if last else size - 1
        except ValueError:
            return None
        if end < start:
            return None
        if start >= size:
            return "416"
        return (start, min(end, size - 1))

    async def send_file(self, writer, method, target, rng, headers, path,
                        closing):
        st = os.stat(path)
        size = st.st_size
        etag = '"%x-%x-%x"' % (size, st.st_mtime_ns, st.st_ino)
        modified = email.utils.formatdate(st.st_mtime, usegmt=True)
        want = self.parse_range(rng, size)
        if_range = headers.get("if-range")
        if if_range is not None and if_range not in (etag, modified):
            want = None
        common = (f"Server: asyncorigin\r\nDate: {now()}\r\n"
                  f"Accept-Ranges: bytes\r\n"
                  f"ETag: {etag}\r\nLast-Modified: {modified}\r\n"
                  + ("Connection: close\r\n" if closing else ""))
        if want == "416":
            writer.write((f"HTTP/1.1 416 Range Not Satisfiable\r\n{common}"
                          f"Content-Range: bytes */{size}\r\n"
                          f"Content-Length: 0\r\n\r\n").encode())
            await writer.drain()
            self.log_line(method, target, rng, 416, 0)
            return
        if want is None:
            status, start, end = 200, 0, size - 1
            extra = ""
        else:
            status, (start, end) = 206, want
            extra = f"Content-Range: bytes {start}-{end}/{size}\r\n"
        length = end - start + 1 if size else 0
        reason = "OK" if status == 200 else "Partial Content"
        writer.write((f"HTTP/1.1 {status} {reason}\r\n{common}{extra}"
                      f"Content-Length: {length}\r\n\r\n").encode())
        progress = [0]
        body = method != "HEAD"
        if body:
            self.sending += 1
        try:
            if body:
                await self.send_body(writer, path, start, length, progress)
            else:
                await writer.drain()
        finally:
            if body:
                self.sending -= 1
            # A client that closes mid-body (a cut range) is logged too,
            # with what was written, as pacefs-origin does.
            self.log_line(method, target, rng, status, progress[0])

    async def send_body(self, writer, path, start, length, progress):
        """Writes the bytes in chunks of --write-chunk, each drained, then
        a sleep of the chunk's time at the rate, as a simple rate-capped
        asyncio server paces; progress[0] counts the bytes written. The
        time a drain waits for the peer's acknowledgements is not made up,
        so a peer that acknowledges late gets a slower stream."""
        chunk = self.chunk or 65536
        with open(path, "rb") as f:
            f.seek(start)
            while progress[0] < length:
                data = f.read(min(chunk, length - progress[0]))
                if not data:
                    break
                writer.write(data)
                await writer.drain()
                progress[0] += len(data)
                if self.rate:
                    await asyncio.sleep(len(data) / self.rate)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", required=True)
    p.add_argument("--listen", default="127.0.0.1:0")
    p.add_argument("--port-file")
    p.add_argument("--latency", type=float, default=0,
                   help="ms before each response")
    p.add_argument("--rate", type=parse_size, default=0,
                   help="body bytes/s per connection (K, M, G suffixes)")
    p.add_argument("--sndbuf", type=parse_size, default=0,
                   help="SO_SNDBUF of each connection")
    p.add_argument("--write-chunk", type=parse_size, default=0,
                   help="bytes per paced write (default 64K)")
    p.add_argument("--one-at-a-time", action="store_true",
                   help="503 + Retry-After: 1 to a request that arrives "
                   "while another body is being written")
    p.add_argument("--log")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--autoindex", action="store_true")
    args = p.parse_args()
    host, _, port = args.listen.rpartition(":")
    if host not in ("127.0.0.1", "localhost", "[::1]"):
        print("asyncorigin: loopback only", file=sys.stderr)
        sys.exit(2)
    origin = Origin(args)

    async def run():
        server = await asyncio.start_server(origin.handle,
                                            host.strip("[]"), int(port))
        bound = server.sockets[0].getsockname()[1]
        if args.port_file:
            tmp = args.port_file + ".tmp"
            with open(tmp, "w") as f:
                f.write(f"{bound}\n")
            os.rename(tmp, args.port_file)
        print(f"listening on {host}:{bound}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with server:
            await stop.wait()

    asyncio.run(run())


if __name__ == "__main__":
    main()
