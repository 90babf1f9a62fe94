"""Raw HTTP client for the server tests: sends bytes exactly as given (curl would fix them).

Usage: raw_http.py HOST:PORT BODY_FILE SECONDS PIECE...
Sends each PIECE (Python string escapes such as \\r\\n are decoded), pausing SECONDS after each,
then reads until the server closes the connection or 10 s pass. Prints the status codes of the
responses read, space-separated ("none" if there was no answer), and writes the last response's
body to BODY_FILE. Requests that should end the exchange send "Connection: close".
"""
import socket
import sys
import time


def send_pieces(sock, pieces, pause):
    for piece in pieces:
        try:
            sock.sendall(piece.encode().decode("unicode_escape").encode("latin-1"))
        except OSError:
            return
        time.sleep(pause)


def read_all(sock):
    out = b""
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                break
            out += data
    except OSError:
        pass
    return out


def split_responses(out):
    """(status codes, bodies) of the Content-Length-framed responses in OUT, in order."""
    codes, bodies = [], []
    while out.startswith(b"HTTP/"):
        head, _, rest = out.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        codes.append(head.split(b" ")[1].decode())
        bodies.append(rest[:length])
        out = rest[length:]
    return codes, bodies


def main():
    host, port = sys.argv[1].rsplit(":", 1)
    body_file, pause, pieces = sys.argv[2], float(sys.argv[3]), sys.argv[4:]
    sock = socket.create_connection((host, int(port)), timeout=10)
    send_pieces(sock, pieces, pause)
    codes, bodies = split_responses(read_all(sock))
    with open(body_file, "wb") as f:
        f.write(bodies[-1] if bodies else b"")
    sys.stdout.write(" ".join(codes) or "none")


if __name__ == "__main__":
    main()
