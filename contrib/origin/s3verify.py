#!/usr/bin/python3
# s3verify.py: the signature check of pacefs-origin's S3 mode, done by
# botocore (Debian's python3-botocore), so that what the test origin accepts
# is what AWS's own SDK computes, not what pacefs's code or ours believes.
#
# One request a line on stdin, its fields hex-encoded and separated by one
# space: method, path (as sent, percent-encoded), query (as sent, without
# '?'), the signed headers ("name:value\n" each, as received), access key
# id, secret key, region, X-Amz-Date. The answer is one line on stdout: the
# signature botocore computes for it (64 hex digits), or "ERR reason".
#
# The canonical request is built as S3 builds it: the path and the query
# are decoded and encoded again by the SigV4 rules (every byte but
# A-Z a-z 0-9 - . _ ~ percent-encoded; '/' kept in the path), so a client
# that encodes otherwise fails as it would against S3.
import sys
import urllib.parse

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials


def field(h):
    return bytes.fromhex(h)


def sign(fields):
    method, path, query, headers, akid, secret, region, amzdate = fields
    path = urllib.parse.quote(urllib.parse.unquote_to_bytes(path), safe='/~')
    params = []
    for pair in query.split(b'&') if query else []:
        k, _, v = pair.partition(b'=')
        params.append((urllib.parse.unquote_to_bytes(k).decode('utf-8'),
                       urllib.parse.unquote_to_bytes(v).decode('utf-8')))
    hdrs = {}
    for line in headers.decode('latin-1').split('\n'):
        if not line:
            continue
        name, _, value = line.partition(':')
        if name in hdrs:
            hdrs[name] += ',' + value
        else:
            hdrs[name] = value
    host = hdrs.get('host', 'localhost')
    req = AWSRequest(method=method.decode(), url='http://' + host + path,
                     headers=hdrs, params=params)
    req.context['timestamp'] = amzdate.decode()
    auth = S3SigV4Auth(Credentials(akid.decode(), secret.decode()), 's3',
                       region.decode())
    canonical = auth.canonical_request(req)
    return auth.signature(auth.string_to_sign(req, canonical), req)


def main():
    for line in sys.stdin:
        try:
            fields = [field(h) for h in line.split(' ')]
            if len(fields) != 8:
                raise ValueError('expected 8 fields, got %d' % len(fields))
            out = sign(fields)
        except Exception as e:  # one bad request must not stop the origin
            out = 'ERR ' + ' '.join(str(e).split())
        sys.stdout.write(out + '\n')
        sys.stdout.flush()


if __name__ == '__main__':
    main()
