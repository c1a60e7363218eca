"""A local stand-in for GitHub: smart-HTTP git (git http-backend, pushes need the token as basic auth)
and the one REST call cocoon makes (create a pull request), recording every request."""

import base64
import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class GitHost:
    def __init__(self, host: str, root: Path, token: str) -> None:
        self.root, self.token, self.requests = root, token, []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                owner._handle(self)

            def do_POST(self) -> None:
                owner._handle(self)

        self.server = ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _authorized(self, request: BaseHTTPRequestHandler, scheme: str) -> bool:
        header = request.headers.get("Authorization", "")
        if scheme == "Basic":
            return header == "Basic " + base64.b64encode(f"x-access-token:{self.token}".encode()).decode()
        return header == f"Bearer {self.token}"

    def _handle(self, request: BaseHTTPRequestHandler) -> None:
        body = self._body(request)
        self.requests.append(
            {"method": request.command, "path": request.path, "headers": dict(request.headers), "body": body}
        )
        if request.path.startswith("/api/"):
            self._api(request, body)
        else:
            self._git(request, body)

    @staticmethod
    def _body(request: BaseHTTPRequestHandler) -> bytes:
        if request.headers.get("Transfer-Encoding", "").lower() != "chunked":
            return request.rfile.read(int(request.headers.get("Content-Length") or 0))
        body = b""  # git sends bodies over http.postBuffer chunked
        while size := int(request.rfile.readline().split(b";")[0], 16):
            body += request.rfile.read(size)
            request.rfile.readline()
        request.rfile.readline()
        return body

    def _api(self, request: BaseHTTPRequestHandler, body: bytes) -> None:
        if not self._authorized(request, "Bearer"):
            self._reply(request, 401, {"message": "Bad credentials"})
        elif request.command == "POST" and request.path.endswith("/pulls"):
            payload = json.loads(body)
            self._reply(
                request, 201, {"number": 7, "html_url": f"{self.url}/pull/7", "title": payload["title"]}
            )
        else:
            self._reply(request, 404, {"message": "Not Found"})

    def _reply(self, request: BaseHTTPRequestHandler, status: int, payload: dict) -> None:
        data = json.dumps(payload).encode()
        request.send_response(status)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(data)))
        request.end_headers()
        request.wfile.write(data)

    def _git(self, request: BaseHTTPRequestHandler, body: bytes) -> None:
        path, _, query = request.path.partition("?")
        pushing = "git-receive-pack" in request.path
        if pushing and not self._authorized(request, "Basic"):
            request.send_response(401)
            request.send_header("WWW-Authenticate", 'Basic realm="git"')
            request.send_header("Content-Length", "0")
            request.end_headers()
            return
        env = {
            "GIT_PROJECT_ROOT": str(self.root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REQUEST_METHOD": request.command,
            "CONTENT_TYPE": request.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "GIT_PROTOCOL": request.headers.get("Git-Protocol", ""),  # v2, as GitHub speaks it
            "PATH": "/usr/bin:/bin",
        }
        if pushing:
            env["REMOTE_USER"] = "x-access-token"
        output = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True).stdout
        head, _, payload = output.partition(b"\r\n\r\n")
        status = 200
        headers = []
        for line in head.decode().split("\r\n"):
            name, _, value = line.partition(": ")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers.append((name, value))
        request.send_response(status)
        for name, value in headers:
            request.send_header(name, value)
        request.send_header("Content-Length", str(len(payload)))
        request.end_headers()
        request.wfile.write(payload)
