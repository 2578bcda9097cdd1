# pyhttp.py PORT DIR LOG: `python3 -m http.server`'s own handler
# (SimpleHTTPRequestHandler, which answers every range request with 200 and
# the whole file, and lists directories without sizes) on 127.0.0.1:PORT,
# serving DIR; each request's body bytes written go to LOG as
# "METHOD PATH BYTES", so that a test sees what was sent.
import functools
import http.server
import sys


class Handler(http.server.SimpleHTTPRequestHandler):
    def copyfile(self, source, outputfile):
        sent = 0
        try:
            while True:
                buf = source.read(65536)
                if not buf:
                    break
                outputfile.write(buf)
                sent += len(buf)
        finally:
            with open(LOG, "a") as f:
                f.write("%s %s %d\n" % (self.command, self.path, sent))

    def log_message(self, *args):
        pass


PORT, ROOT, LOG = int(sys.argv[1]), sys.argv[2], sys.argv[3]
http.server.ThreadingHTTPServer(
    ("127.0.0.1", PORT), functools.partial(Handler, directory=ROOT)
).serve_forever()
