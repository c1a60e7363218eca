"""Request splitting through the egress proxy, tried from inside a real egress sandbox with raw sockets
to the credential proxy (:8080, which adds the real key) and the plain-HTTP proxy (:3128).

Whatever the sandbox writes, the recording stand-in upstream sees at most one request per connection,
always for the host the proxy checked (for the credential proxy: the provider's own, under its path),
and never a request the sandbox smuggled in behind the first."""

import pytest

from tests.test_egress import recorded, sh, shell_agent

pytestmark = pytest.mark.e2e

# {key} is the sandbox's placeholder; every malformed request also tries to smuggle a second one.
SMUGGLED = "GET /smuggled HTTP/1.1\n" + "Host: denied.invalid\n"
MALFORMED_8080 = {
    "bare LF in a header value": "GET /p-standin/one HTTP/1.1\r\nx-api-key: {key}\r\nX-A: a\n\n"
    + SMUGGLED
    + "X-B: b\r\n\r\n",
    "bare LF line ends": "GET /p-standin/one HTTP/1.1\nx-api-key: {key}\n\n" + SMUGGLED + "\n",
    "bare CR in a header value": "GET /p-standin/one HTTP/1.1\r\nx-api-key: {key}\r\n"
    "X-A: a\rHost: denied.invalid\r\n\r\n",
    "obs-fold": "GET /p-standin/one HTTP/1.1\r\nx-api-key: {key}\r\nX-A: a\r\n Host: denied.invalid\r\n\r\n",
    "space before the colon": "POST /p-standin/one HTTP/1.1\r\nx-api-key: {key}\r\n"
    "Transfer-Encoding : chunked\r\nContent-Length: 0\r\n\r\n",
    "invalid token in the method": "G(T /p-standin/one HTTP/1.1\r\nx-api-key: {key}\r\n\r\n",
    "control character in the target": "GET /p-standin/one\x0bHTTP/1.1 HTTP/1.1\r\nx-api-key: {key}\r\n\r\n",
    "dot segments leave the provider's path": "GET /p-standin/../smuggled HTTP/1.1\r\n"
    "x-api-key: {key}\r\n\r\n",
    "encoded dot segments": "GET /p-standin/%2e%2e/smuggled HTTP/1.1\r\nx-api-key: {key}\r\n\r\n",
    "Content-Length and Transfer-Encoding": "POST /p-standin/one HTTP/1.1\r\nx-api-key: {key}\r\n"
    "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    "GET /p-standin/smuggled HTTP/1.1\r\nx-api-key: {key}\r\n\r\n",
    "two equal Content-Lengths": "POST /p-standin/one HTTP/1.1\r\nx-api-key: {key}\r\n"
    "Content-Length: 2\r\nContent-Length: 2\r\n\r\nhi",
    "a Content-Length list": "POST /p-standin/one HTTP/1.1\r\nx-api-key: {key}\r\n"
    "Content-Length: 2, 2\r\n\r\nhi",
    "another transfer coding": "POST /p-standin/one HTTP/1.1\r\nx-api-key: {key}\r\n"
    "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    "a bad chunk size": "POST /p-standin/one HTTP/1.1\r\nx-api-key: {key}\r\n"
    "Transfer-Encoding: chunked\r\n\r\n2 \nhi\r\n0\r\n\r\n",
    "bare LF in a chunk trailer": "POST /p-standin/one HTTP/1.1\r\nx-api-key: {key}\r\n"
    "Transfer-Encoding: chunked\r\n\r\n0\r\nX-T: a\n\n" + SMUGGLED + "\r\n\r\n",
}
MALFORMED_3128 = {
    "bare LF in a header value": "GET http://allowed.invalid/one HTTP/1.1\r\nHost: allowed.invalid\r\n"
    "X-A: a\n\n" + SMUGGLED + "X-B: b\r\n\r\n",
    "obs-fold": "GET http://allowed.invalid/one HTTP/1.1\r\nHost: allowed.invalid\r\nX-A: a\r\n"
    " Host: denied.invalid\r\n\r\n",
    "Content-Length and Transfer-Encoding": "POST http://allowed.invalid/one HTTP/1.1\r\n"
    "Host: allowed.invalid\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
}
# Found only while the body streams: the head may have gone on, the rest of the body never does.
BODY_ERRORS = {"a bad chunk size", "bare LF in a chunk trailer"}
# Well-formed first requests with a second one behind them: the first is answered, nothing else goes on.
TRAILING = {
    "pipelined": (
        8080,
        "GET /p-standin/one HTTP/1.1\r\nx-api-key: {key}\r\n\r\n"
        "GET /p-standin/smuggled HTTP/1.1\r\nx-api-key: {key}\r\n\r\n",
    ),
    "after a Content-Length body": (
        8080,
        "POST /p-standin/one HTTP/1.1\r\nx-api-key: {key}\r\nContent-Length: 2\r\n\r\nhi"
        "GET /smuggled HTTP/1.1\r\nHost: denied.invalid\r\nx-api-key: {key}\r\n\r\n",
    ),
    "after a chunked body": (
        8080,
        "POST /p-standin/one HTTP/1.1\r\nx-api-key: {key}\r\nTransfer-Encoding: chunked\r\n\r\n"
        "2\r\nhi\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: denied.invalid\r\n\r\n",
    ),
    "plain HTTP pipelined": (
        3128,
        "GET http://allowed.invalid/one HTTP/1.1\r\nHost: allowed.invalid\r\n\r\n"
        "GET http://denied.invalid/smuggled HTTP/1.1\r\nHost: denied.invalid\r\n\r\n",
    ),
}


@pytest.fixture(scope="module")
def placeholder(cocoond, egress, provider):
    """The sandbox's placeholder key, as an agent with the provider has it in its environment."""
    shell_agent(cocoond, egress, providers=[provider])
    found = sh(
        cocoond,
        egress,
        "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -om1 'cocoon_[0-9a-f]*_STANDIN_SECRET'",
    )
    assert found["stdout"].strip(), found
    return found["stdout"].strip()


def send(cocoond, sandbox, port: int, data: str) -> str:
    """data written as is to the proxy from inside the sandbox; returns the answer."""
    script = f"exec 3<>/dev/tcp/cocoon-proxy/{port}; cat >&3; timeout 5 cat <&3"
    return sh(cocoond, sandbox, script, stdin=data)["stdout"]


def assert_nothing_smuggled(upstream, hosts: set[str]) -> None:
    requests = upstream.requests()
    assert len(requests) <= 1, requests
    for request in requests:
        assert dict(request["headers"])["host"] in hosts, request
        assert "smuggled" not in request["path"], request


@pytest.mark.parametrize("attempt", MALFORMED_8080)
def test_the_credential_proxy_refuses_a_malformed_request(cocoond, egress, upstream, placeholder, attempt):
    upstream.clear()
    answer = send(cocoond, egress, 8080, MALFORMED_8080[attempt].format(key=placeholder))
    assert_nothing_smuggled(upstream, {"llm.invalid"})
    if attempt not in BODY_ERRORS:
        assert recorded(upstream) == []
    assert answer.startswith("HTTP/1.1 400"), answer


@pytest.mark.parametrize("attempt", MALFORMED_3128)
def test_the_forward_proxy_refuses_a_malformed_request(cocoond, egress, upstream, attempt):
    upstream.clear()
    answer = send(cocoond, egress, 3128, MALFORMED_3128[attempt])
    assert_nothing_smuggled(upstream, {"allowed.invalid"})
    assert recorded(upstream) == []
    assert answer.startswith("HTTP/1.1 400"), answer


@pytest.mark.parametrize("attempt", TRAILING)
def test_bytes_after_one_request_never_reach_the_upstream(cocoond, egress, upstream, placeholder, attempt):
    upstream.clear()
    port, data = TRAILING[attempt]
    answer = send(cocoond, egress, port, data.format(key=placeholder))
    assert " 200 " in answer.split("\r\n", 1)[0], answer
    assert_nothing_smuggled(upstream, {"llm.invalid", "allowed.invalid"})
    [request] = upstream.requests()
    assert request["path"] in {"/api/one", "/one"}
    headers = dict(request["headers"])
    assert headers["connection"] == "close"
