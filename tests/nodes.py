"""Engines of their own on this machine, as other hosts would be: a dockerd in a network namespace
(tests/netns.py) with its own data root, exec root and cgroup parent, listening only on its veth
address with mutual TLS (a CA of the test's own, a server certificate for that address, a client
certificate for cocoon)."""

import datetime
import ipaddress
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import docker
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from sandboxes.drivers.docker import remote
from sandboxes.drivers.docker.engine import engine_client
from tests.netns import host_link, namespace_host, namespace_of, routed

ENGINE_PORT = 2376


@dataclass(frozen=True)
class Pki:
    ca: str
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


def _certificate(name: str, key, issuer: str, signer, *, ca: bool = False, extensions=()) -> str:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    for extension in extensions:
        builder = builder.add_extension(extension, critical=False)
    return builder.sign(signer, hashes.SHA256()).public_bytes(serialization.Encoding.PEM).decode()


def make_pki(address: str, ca_name: str = "cocoon-test-ca") -> Pki:
    """A CA, a server certificate for the engine's address and a client certificate signed by it."""
    ca_key, server_key, client_key = _key(), _key(), _key()
    ca = _certificate(ca_name, ca_key, ca_name, ca_key, ca=True)
    server = _certificate(
        "engine",
        server_key,
        ca_name,
        ca_key,
        extensions=[
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(address))]),
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
        ],
    )
    client = _certificate(
        "cocoon",
        client_key,
        ca_name,
        ca_key,
        extensions=[x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH])],
    )
    return Pki(ca, server, _pem_key(server_key), client, _pem_key(client_key))


@dataclass(frozen=True)
class RemoteEngine:
    name: str
    address: str
    url: str
    pki: Pki
    root: Path

    def tls(self) -> dict[str, str]:
        """What node.add takes: the CA to pin, cocoon's client certificate and key."""
        return {"ca": self.pki.ca, "cert": self.pki.client_cert, "key": self.pki.client_key}

    def docker_from_inside(self, *args: str) -> subprocess.CompletedProcess:
        """The docker CLI run in the engine's own namespace: it reaches the engine while the host's
        way to it is cut."""
        folder = self.root / "client"
        remote.tls_config(folder, self.pki.ca, self.pki.client_cert, self.pki.client_key)  # the files
        tls = ["--tlsverify", f"--tlscacert={folder}/ca.pem", f"--tlscert={folder}/cert.pem"]
        command = ["docker", *tls, f"--tlskey={folder}/key.pem", "-H", self.url, *args]
        return subprocess.run(
            ["ip", "netns", "exec", namespace_of(self.name), *command], capture_output=True, text=True
        )

    def client(self) -> docker.DockerClient:
        """The test's own way in, with cocoon's certificate."""
        tls = remote.tls_config(self.root / "client", self.pki.ca, self.pki.client_cert, self.pki.client_key)
        return engine_client(self.url, tls, 60)


@contextmanager
def remote_engine(name: str, subnet: str, root: Path) -> Iterator[RemoteEngine]:
    """A dockerd at <subnet>.2:2376 (mutual TLS only), its state under root; removed afterwards."""
    address = f"{subnet}.2"
    pki = make_pki(address)
    root.mkdir(parents=True, exist_ok=True)
    files = {
        "ca.pem": pki.ca,
        "server-cert.pem": pki.server_cert,
        "server-key.pem": pki.server_key,
        # Not /etc/docker/daemon.json: the host engine's settings are not this one's.
        "daemon.json": '{"live-restore": true}',
    }
    for file, content in files.items():
        (root / file).write_text(content)
        (root / file).chmod(0o600)
    # ip netns exec gives the engine a mount namespace with a fresh /sys, without the host's cgroups:
    # they are bound in from a mount of them outside /sys.
    cgroups, identity = root / "cgroup", root / "etc-docker"
    cgroups.mkdir(exist_ok=True)
    identity.mkdir(exist_ok=True)
    subprocess.run(["mount", "--rbind", "/sys/fs/cgroup", str(cgroups)], check=True)
    serve = [
        "sh",
        "-c",
        'mount --rbind "$0" /sys/fs/cgroup && mount --bind "$1" /etc/docker && shift && exec "$@"',
        str(cgroups),
        # Its own /etc/docker: its own identity (key.json), as another host's engine has.
        str(identity),
        "dockerd",
        "--config-file", str(root / "daemon.json"),
        "--data-root", str(root / "data"),
        "--exec-root", str(root / "exec"),
        "--pidfile", str(root / "dockerd.pid"),
        "--cgroup-parent", f"cocoon-{name}",
        "--host", f"tcp://{address}:{ENGINE_PORT}",
        "--tlsverify",
        "--tlscacert", str(root / "ca.pem"),
        "--tlscert", str(root / "server-cert.pem"),
        "--tlskey", str(root / "server-key.pem"),
    ]  # fmt: skip
    engine = RemoteEngine(name, address, f"tcp://{address}:{ENGINE_PORT}", pki, root)
    try:
        with namespace_host(name, subnet, serve, ENGINE_PORT), routed(host_link(name)):
            try:
                yield engine
            finally:  # live-restore would keep its containers running past the engine
                client = engine.client()
                for container in client.containers.list(all=True):
                    container.remove(force=True, v=True)
                client.close()
    finally:
        subprocess.run(["umount", "-R", "-l", str(cgroups)], check=False)
        shutil.rmtree(root, ignore_errors=True)
