"""Relay against real SIP peers (DESIGN §5.7, "the SIP world, not only SIPp"): Kamailio 5.6
as a carrier-like edge proxy, baresip as the phone at the other end.

Kamailio record-routes every dialog, loose-routes what follows, checks Max-Forwards and
sanity, and asks Relay for digest proxy credentials on INVITEs toward a callee. Numbers of the
callee range (+44 113 496 0xxx) go to a baresip that answers at once; every other number goes
to Relay's agent. Each request and response it handles is one `interop:` line of its log,
which is how a test proves that an ACK or a BYE went through it, and over which transport, and
what its SDP offered (`sdp=RTP/SAVP crypto=yes`: SRTP keys, which Kamailio reads inside TLS).

Over TLS (the `tls` transport) every hop is TLS, with certificates of a test CA (certs.py),
and media is SRTP: Relay has SIP_SRTP=required, baresip `mediaenc=srtp-mand`.

A test that needs Kamailio, baresip, espeak-ng or sox (and, over TLS, Kamailio's tls module
and baresip's srtp module) skips naming what is missing; in CI (CI=true) it fails instead,
because .ci/run installs them.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.live import ChildProcess, RelayProcess, free_port, wait_until
from tests.telephony.certs import Issued, TestCA
from tests.telephony.conftest import (
    free_udp_port,
    rtp_range,
    sip_env,
    tcp_listening,
    udp_port_taken,
)

TOOLS = ("kamailio", "baresip", "espeak-ng", "sox")
KAMAILIO_MODULES = Path("/usr/lib/x86_64-linux-gnu/kamailio/modules")
BARESIP_MODULES = Path("/usr/lib/baresip/modules")
# What the `tls` transport needs besides: Debian's kamailio-tls-modules, and baresip-core's
# SRTP module.
TLS_MODULES = (KAMAILIO_MODULES / "tls.so", BARESIP_MODULES / "srtp.so")

# The digest credentials Kamailio asks of Relay, given to Relay as SIP_USERNAME/SIP_PASSWORD.
TRUNK_USER = "relay-interop"
TRUNK_PASSWORD = "kamailio-static-secret"
TRUNK_REALM = "interop.relay.test"
# Callees live in Ofcom's drama range for Leeds; callers in the one for mobiles. A caller
# presenting NAT_CALLER has the
# connection address of its SDP rewritten by Kamailio to a documentation address (RFC 5737).
CALLEE = "+441134960200"
CALLER = "+447700900123"
NAT_CALLER = "+447700900199"
# Loopback, but not baresip's 127.0.0.1: until Relay latches, its RTP goes there, and no
# packet of a test ever leaves the host.
NAT_ADDRESS = "127.0.0.2"


def tool(name: str) -> str:
    """The full path of a command this suite starts (ruff's S607: never a bare name)."""
    path = shutil.which(name)
    assert path, f"{name} is not installed"
    return path


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def pytest_collection_modifyitems(config, items):
    if os.environ.get("CI"):
        return  # in CI a missing tool fails the tests that need it
    missing = missing_tools()
    missing_tls = [str(path) for path in TLS_MODULES if not path.exists()]
    reason = (
        f"needs {', '.join(missing)} (Debian: apt-get install kamailio baresip-core espeak-ng sox)"
    )
    tls_reason = f"needs {', '.join(missing_tls)} (Debian: apt-get install kamailio-tls-modules)"
    here = str(Path(__file__).parent)
    for item in items:
        if not str(item.fspath).startswith(here):
            continue
        if missing:
            item.add_marker(pytest.mark.skip(reason=reason))
        elif missing_tls and item_transport(item) == "tls":
            item.add_marker(pytest.mark.skip(reason=tls_reason))


def item_transport(item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("transport") if callspec is not None else None


def free_dual_port() -> int:
    """A port free for both UDP and TCP on 127.0.0.1, with the next one free for TCP: baresip
    listens on both at `sip_listen`'s port, and for TLS on the port after it."""
    for _ in range(50):
        port = free_udp_port()
        if port >= 65535:
            continue
        with socket.socket() as first, socket.socket() as second:
            try:
                first.bind(("127.0.0.1", port))
                second.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port
    raise AssertionError("no port free for both UDP and TCP, with the next one free for TCP")


def free_dual_port_pair() -> int:
    """A port that, with the next one, is free for UDP and TCP on 127.0.0.1: baresip listens
    for UDP and TCP on its `sip_listen` port and for TLS on the next."""
    for _ in range(50):
        port = free_dual_port()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u, socket.socket() as t:
            try:
                u.bind(("127.0.0.1", port + 1))
                t.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port
    raise AssertionError("no two ports in a row free for both UDP and TCP")


KAMAILIO_CFG = r"""#!KAMAILIO
# Generated by tests/telephony/interop/conftest.py: a carrier-like edge on loopback.
debug=1
log_stderror=yes
log_prefix=""
children=1
tcp_children=1
auto_aliases=no
@listen@
alias="127.0.0.1:@port@"
dns=no
rev_dns=no
use_dns_cache=no
tcp_connection_lifetime=120

loadpath "@mpath@"
loadmodule "kex.so"
loadmodule "corex.so"
loadmodule "tm.so"
loadmodule "sl.so"
loadmodule "rr.so"
loadmodule "pv.so"
loadmodule "maxfwd.so"
loadmodule "textops.so"
loadmodule "siputils.so"
loadmodule "xlog.so"
loadmodule "sanity.so"
loadmodule "auth.so"
@tls_module@
modparam("rr", "enable_full_lr", 1)
modparam("rr", "append_fromtag", 1)
modparam("auth", "secret", "interop-nonce-secret")
modparam("tm", "fr_timer", 10000)
modparam("tm", "fr_inv_timer", 60000)

request_route {
    route(SDP);
    xnotice("interop: request $rm $ru call-id=$ci from=$fU src=$si:$sp proto=$pr $var(sdp)\n");

    if (!mf_process_maxfwd_header("10")) {
        sl_send_reply("483", "Too Many Hops");
        exit;
    }
    if (!sanity_check()) {
        xnotice("interop: insane $rm call-id=$ci\n");
        exit;
    }

    if (has_totag()) {
        if (loose_route()) {
            xnotice("interop: routed $rm call-id=$ci from=$fU src=$si:$sp proto=$pr next=$ru\n");
            route(RELAY);
        }
        if (is_method("ACK") && t_check_trans()) {
            t_relay();  # the ACK of a non-2xx final response we relayed
            exit;
        }
        xnotice("interop: stray $rm call-id=$ci (no route set)\n");
        if (!is_method("ACK")) {
            sl_send_reply("404", "Not Here");
        }
        exit;
    }

    if (is_method("CANCEL")) {
        if (t_check_trans()) {
            route(RELAY);
        }
        exit;
    }
    t_check_trans();  # a retransmission is absorbed here

    if (is_method("INVITE|SUBSCRIBE")) {
        record_route();
    }

    if ($rU =~ "^\+?44113496") {
        # Toward a callee: only a caller with the carrier's credentials may dial out.
        if (is_method("INVITE")) {
            if (!pv_proxy_authenticate("@realm@", "@password@", "0")) {
                xnotice("interop: challenge $rm call-id=$ci\n");
                proxy_challenge("@realm@", "0");
                exit;
            }
            if ($au != "@user@") {
                sl_send_reply("403", "Wrong User");
                exit;
            }
            xnotice("interop: authenticated $rm call-id=$ci as $au\n");
            consume_credentials();
        }
        $ru = "sip:" + $rU + "@127.0.0.1:@callee_port@;transport=@transport@";
        route(RELAY);
    }

    if ($rU =~ "^\+?44") {
        if (is_method("INVITE") && $fU == "@nat_caller@") {
            # The caller is behind a NAT that left its private address in the SDP.
            subst_body("/c=IN IP4 127\.0\.0\.1/c=IN IP4 @nat_address@/g");
            xnotice("interop: rewrote the SDP of call-id=$ci to @nat_address@\n");
        }
        $ru = "sip:" + $rU + "@127.0.0.1:@relay_port@;transport=@transport@";
        route(RELAY);
    }

    sl_send_reply("404", "No Route");
    exit;
}

route[RELAY] {
    t_on_reply("REPLY");
    if (!t_relay()) {
        sl_reply_error();
    }
    exit;
}

# What the SDP of a message offers or answers: its audio profile, and whether it carries an
# SRTP key of the suite Relay speaks (SDES, RFC 4568). The keys themselves are not logged.
route[SDP] {
    $var(sdp) = "sdp=none";
    if (has_body("application/sdp")) {
        $var(sdp) = "sdp=other";
        if (search_body("m=audio [0-9]+ RTP/AVP ")) {
            $var(sdp) = "sdp=RTP/AVP";
        }
        if (search_body("m=audio [0-9]+ RTP/SAVP ")) {
            $var(sdp) = "sdp=RTP/SAVP";
        }
        if (search_body("a=crypto:[0-9]+ AES_CM_128_HMAC_SHA1_80 inline:")) {
            $var(sdp) = $var(sdp) + " crypto=yes";
        } else {
            $var(sdp) = $var(sdp) + " crypto=no";
        }
    }
}

onreply_route[REPLY] {
    route(SDP);
    xnotice("interop: reply $rs $rr to $rm call-id=$ci src=$si:$sp proto=$pr $var(sdp) "
            "rr=$hdr(Record-Route)\n");
}
"""


KAMAILIO_TLS_CFG = """# Generated by tests/telephony/interop/conftest.py: Kamailio's TLS, both ways.
[server:default]
method = TLSv1.2+
verify_certificate = no
require_certificate = no
certificate = @cert@
private_key = @key@
ca_list = @ca@

[client:default]
method = TLSv1.2+
verify_certificate = yes
require_certificate = yes
certificate = @cert@
private_key = @key@
ca_list = @ca@
"""


class Kamailio(ChildProcess):
    """Kamailio in the foreground on 127.0.0.1:`port` (UDP and TCP; UDP and TLS with
    `transport` tls), forwarding to the callee baresip on `callee_port` and to Relay on
    `relay_port`, over `transport`. Over TLS it shows `cert` and checks its peers' against
    `ca` (client connections: Relay and baresip), and a plain UDP request to its port would
    still show in its log. Its log, the `interop:` lines above and Kamailio's own errors, is
    `workdir/kamailio.log`."""

    stop_grace = 10

    def __init__(
        self,
        workdir: Path,
        *,
        transport: str,
        relay_port: int,
        callee_port: int,
        ca: Path | None = None,
        cert: Issued | None = None,
    ):
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_dual_port()
        self.transport = transport
        second = "tls" if transport == "tls" else "tcp"
        listen = f"listen=udp:127.0.0.1:{self.port}\nlisten={second}:127.0.0.1:{self.port}"
        tls_module = ""
        if transport == "tls":
            assert ca is not None and cert is not None, "Kamailio over TLS needs certificates"
            tls_cfg = workdir / "tls.cfg"
            tls_cfg.write_text(
                KAMAILIO_TLS_CFG.replace("@cert@", str(cert.cert))
                .replace("@key@", str(cert.key))
                .replace("@ca@", str(ca))
            )
            listen += "\nenable_tls=yes"
            tls_module = f'loadmodule "tls.so"\nmodparam("tls", "config", "{tls_cfg}")\n'
        fill = {
            "listen": listen,
            "tls_module": tls_module,
            "port": self.port,
            "mpath": f"{KAMAILIO_MODULES}/",
            "realm": TRUNK_REALM,
            "user": TRUNK_USER,
            "password": TRUNK_PASSWORD,
            "callee_port": callee_port,
            "relay_port": relay_port,
            "transport": transport,
            "nat_caller": NAT_CALLER,
            "nat_address": NAT_ADDRESS,
        }
        text = KAMAILIO_CFG
        for name, value in fill.items():
            text = text.replace(f"@{name}@", str(value))
        self.cfg = workdir / "kamailio.cfg"
        self.cfg.write_text(text)
        rundir = workdir / "run"
        rundir.mkdir(exist_ok=True)
        argv = [tool("kamailio"), "-f", str(self.cfg), "-DD", "-E", "-m", "64", "-M", "8"]
        argv += ["-P", str(rundir / "kamailio.pid"), "-Y", str(rundir), "-w", str(rundir)]
        super().__init__(argv, dict(os.environ), log=workdir / "kamailio.log")

        def listening() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"Kamailio exited at start-up{self._log_tail()}")
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", self.port)) == 0

        wait_until(listening, deadline=20, what="Kamailio to listen")

    def lines(self, call_id: str | None = None) -> list[str]:
        """The `interop:` lines of its log, those of `call_id` only if given."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        found = [
            line[line.index("interop: ") :] for line in text.splitlines() if "interop: " in line
        ]
        if call_id is not None:
            found = [line for line in found if f"call-id={call_id} " in f"{line} "]
        return found

    def routed(self, call_id: str, method: str, *, sender: str | None = None) -> list[str]:
        """The in-dialog `method` requests of `call_id` that followed the route set through
        Kamailio (it found itself in their Route header); only those whose From user is
        `sender` if given: the caller's, or (with the callee's number) the callee's."""
        prefix = f"interop: routed {method} call-id={call_id} "
        mine = f" from={sender} " if sender else " "
        return [line for line in self.lines(call_id) if line.startswith(prefix) and mine in line]

    def replies(self, call_id: str, status: int, method: str = "INVITE") -> list[str]:
        """The `status` responses to `method` of `call_id` that Kamailio relayed, as it got
        them; each line ends with the Record-Route they carried (`rr=<null>`: none)."""
        prefix = f"interop: reply {status} "
        return [
            line
            for line in self.lines(call_id)
            if line.startswith(prefix) and f" to {method} call-id=" in line
        ]

    def carries_record_route(self, line: str) -> bool:
        """Whether a `reply` line carried the Record-Route Kamailio inserts, which a UAS must
        copy into its 18x/2xx. Over TLS its scheme is the Request-URI's: sips: for Relay's
        calls out, sip: (with transport=tls) for baresip's."""
        scheme = "sips?" if self.transport == "tls" else "sip"
        suffix = f";transport={self.transport}" if self.transport != "udp" else ""
        return re.search(rf" rr=<{scheme}:127\.0\.0\.1:{self.port}{suffix};lr", line) is not None

    def sdp(self, line: str) -> str:
        """What the SDP of a `request` or `reply` line offered or answered, as the line says
        it: `sdp=RTP/SAVP crypto=yes` (SRTP with a key of Relay's suite), `sdp=none`..."""
        found = re.search(r" (sdp=\S+(?: crypto=\S+)?)", line)
        return found.group(1) if found else ""

    @property
    def trace(self) -> str:
        """Its `interop:` lines, for an assertion's message (a string: pytest shortens reprs)."""
        return "Kamailio's log:\n" + "\n".join(self.lines()[-80:])


BARESIP_CONFIG = """# Generated by tests/telephony/interop/conftest.py: a headless phone.
poll_method		epoll
sip_listen		127.0.0.1:@port@
net_interface		127.0.0.1
call_local_timeout	120
call_max_calls		2
audio_source		aufile,@source@
audio_level		no
ausrc_format		s16
auplay_format		s16
auenc_format		s16
audec_format		s16
audio_buffer		20-160
rtp_ports		@rtp_ports@
rtcp_mux		no
jitter_buffer_delay	2-10
rtp_stats		no
module_path		@mpath@
module			g711.so
module			sndfile.so
module			aufile.so
module_tmp		account.so
module_app		menu.so
module_app		ctrl_tcp.so
ctrl_tcp_listen		127.0.0.1:@ctrl_port@
snd_path		@snd_path@
"""


@dataclass
class Event:
    type: str
    param: str
    raw: dict


class Baresip(ChildProcess):
    """baresip 1.0 without a sound card: it sends `source` (a WAV file, 8 kHz mono, 16-bit) as
    its microphone, and writes what it hears to `workdir/heard/dump-*-dec.wav` (sndfile).
    The call hangs up when `source` runs out (aufile reports the end as an audio error).
    Driven over ctrl_tcp: JSON commands in netstrings, the same for its events.

    Over TLS (`tls`: the CA file to trust and its own certificate and key, in one PEM file)
    it listens for TLS on the port after `port`, and its media is `mediaenc` (srtp-mand:
    RTP/SAVP with SDES keys only; None: plain RTP)."""

    stop_grace = 5

    def __init__(
        self,
        workdir: Path,
        *,
        number: str,
        source: Path,
        transport: str,
        answer: bool = False,
        port: int | None = None,
        tls: tuple[Path, Path] | None = None,
        mediaenc: str | None = None,
    ):
        self.workdir = workdir
        self.heard_dir = workdir / "heard"
        self.heard_dir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_dual_port()
        self.transport = transport
        ctrl_port = free_port()
        fill = {
            "port": self.port,
            "source": source,
            "rtp_ports": rtp_range(40),
            "mpath": BARESIP_MODULES,
            "ctrl_port": ctrl_port,
            "snd_path": self.heard_dir,
        }
        config = BARESIP_CONFIG
        for name, value in fill.items():
            config = config.replace(f"@{name}@", str(value))
        confdir = workdir / "conf"
        confdir.mkdir(exist_ok=True)
        if tls is not None:
            config += f"sip_cafile\t\t{tls[0]}\nsip_certificate\t\t{tls[1]}\n"
        if mediaenc is not None:
            config += "module\t\t\tsrtp.so\n"
        (confdir / "config").write_text(config)
        params = ";regint=0;audio_codecs=PCMU,PCMA" + (";answermode=auto" if answer else "")
        params += f";mediaenc={mediaenc}" if mediaenc else ""
        aor = f"<sip:{number}@127.0.0.1;transport={transport}>{params}"
        (confdir / "accounts").write_text(aor + "\n")
        (confdir / "contacts").write_text("")
        super().__init__(
            [tool("baresip"), "-f", str(confdir)], dict(os.environ), log=workdir / "baresip.log"
        )
        self.events: list[Event] = []
        self._buffer = b""
        self._commands = 0
        self.ctrl = wait_until(
            lambda: self._connect(ctrl_port), deadline=20, what="baresip's ctrl_tcp"
        )

    def _connect(self, port: int) -> socket.socket | None:
        if self.proc.poll() is not None:
            raise AssertionError(f"baresip exited at start-up{self._log_tail()}")
        s = socket.socket()
        try:
            s.connect(("127.0.0.1", port))
        except OSError:
            s.close()
            return None
        s.settimeout(0.2)
        return s

    def _read(self) -> list[dict]:
        """Every whole netstring message that has arrived."""
        with contextlib.suppress(TimeoutError, BlockingIOError):
            chunk = self.ctrl.recv(65536)
            if chunk:
                self._buffer += chunk
        messages = []
        while True:
            length, colon, rest = self._buffer.partition(b":")
            if not colon or len(rest) < int(length) + 1:
                return messages
            messages.append(json.loads(rest[: int(length)]))
            self._buffer = rest[int(length) + 1 :]

    def _collect(self) -> list[dict]:
        messages = self._read()
        for message in messages:
            if message.get("event"):
                self.events.append(
                    Event(message.get("type", ""), message.get("param", ""), message)
                )
        return messages

    def command(self, command: str, params: str = "", *, deadline: float = 10) -> str:
        """Run a baresip command (as menu names them: dial, hangup, sndcode...) and return
        its answer; fail if baresip says it failed."""
        self._commands += 1
        token = f"{self._commands}-{command}"
        body = json.dumps({"command": command, "params": params, "token": token}).encode()
        self.ctrl.sendall(b"%d:%s," % (len(body), body))

        def answered():
            for message in self._collect():
                if message.get("response") and message.get("token") == token:
                    return message
            return None

        message = wait_until(answered, deadline=deadline, what=f"baresip to answer {command}")
        assert message.get("ok"), f"baresip refused {command} {params}: {message}{self._log_tail()}"
        return message.get("data", "")

    def wait_event(self, kind: str, *, deadline: float = 30) -> Event:
        """The first event of type `kind` (CALL_ESTABLISHED, CALL_CLOSED...), waiting for it."""

        def seen():
            self._collect()
            return next((e for e in self.events if e.type == kind), None)

        return wait_until(seen, deadline=deadline, what=f"baresip's {kind}", interval=0.02)

    def dial(self, number: str, proxy: Kamailio) -> None:
        # baresip adds its account's transport parameter to the URI itself.
        self.command("dial", f"sip:{number}@127.0.0.1:{proxy.port}")

    def heard(self) -> Path:
        """The WAV of what it heard in its call (the far end's audio, decoded)."""
        found = sorted(self.heard_dir.glob("dump-*-dec.wav"))
        assert found, f"baresip wrote no WAV of what it heard{self._log_tail()}"
        return found[-1]

    def heard_seconds(self) -> float:
        """How much audio it has heard so far: the growing WAV's size after its 44-byte header,
        in 16-bit samples at 8 kHz (sndfile writes each decoded frame as it comes)."""
        found = sorted(self.heard_dir.glob("dump-*-dec.wav"))
        return max(0, found[-1].stat().st_size - 44) / 16000 if found else 0.0

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.ctrl.close()
        super().stop()


@dataclass
class Level:
    seconds: float
    rms: float
    maximum: float


def sox_level(path: Path) -> Level:
    """`sox <wav> -n stat`: length in seconds, RMS and maximum amplitude (0 to 1)."""
    result = subprocess.run(  # noqa: S603 - a fixed command on our own file
        [tool("sox"), str(path), "-n", "stat"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )

    def value(name: str) -> float:
        found = re.search(rf"^{re.escape(name)}:\s+(-?[\d.]+)", result.stderr, re.MULTILINE)
        assert found, f"sox stat printed no {name!r}: {result.stderr}"
        return float(found.group(1))

    return Level(value("Length (seconds)"), value("RMS     amplitude"), value("Maximum amplitude"))


def speech_wav(path: Path, text: str, *, before: float = 0.0, after: float = 0.0) -> Path:
    """`text` spoken by espeak-ng, as baresip's aufile wants it (8 kHz, mono, 16-bit), with
    `before` and `after` seconds of silence around it."""
    raw = path.with_suffix(".espeak.wav")
    subprocess.run(  # noqa: S603
        [tool("espeak-ng"), "-v", "en", "-w", str(raw), text], check=True, timeout=60
    )
    subprocess.run(  # noqa: S603
        [
            tool("sox"), str(raw), "-r", "8000", "-c", "1", "-b", "16", "-e", "signed-integer",
            str(path), "pad", str(before), str(after),
        ],
        check=True,
        timeout=60,
    )  # fmt: skip
    raw.unlink()
    return path


def expected_sdp(transport: str) -> str:
    """What every SDP of a call over `transport` shows in Kamailio's log: over TLS, SRTP
    (Relay's SIP_SRTP=required, baresip's srtp-mand); else plain RTP without a key."""
    return "sdp=RTP/SAVP crypto=yes" if transport == "tls" else "sdp=RTP/AVP crypto=no"


def silence_wav(path: Path, seconds: float) -> Path:
    subprocess.run(  # noqa: S603
        [
            tool("sox"), "-n", "-r", "8000", "-c", "1", "-b", "16", "-e", "signed-integer",
            str(path), "trim", "0", str(seconds),
        ],
        check=True,
        timeout=60,
    )  # fmt: skip
    return path


@pytest.fixture(scope="session", params=["udp", "tcp", "tls"])
def transport(request) -> str:
    return request.param


@pytest.fixture(scope="session")
def test_ca(tmp_path_factory) -> TestCA:
    """The CA every TLS peer of the suite trusts, and that issued their certificates."""
    return TestCA(tmp_path_factory.mktemp("interop-ca"))


@pytest.fixture(scope="session")
def edge(tmp_path_factory, django_db_setup, transport, test_ca):
    """Relay (runrelay, one agent, SIP over `transport`, calls ringing 1 s before voicemail)
    behind Kamailio, with the callee's port reserved: (relay, kamailio, callee_port). Over
    TLS Relay calls `sips:` Kamailio, takes calls on its own certificate (SIP_BIND), and
    requires SRTP; Kamailio sends callees to the TLS port, the one after `callee_port`."""
    workdir = tmp_path_factory.mktemp(f"interop-{transport}")
    relay_port, callee_port = free_dual_port(), free_dual_port_pair()
    secure = transport == "tls"
    kamailio = Kamailio(
        workdir / "kamailio",
        transport=transport,
        relay_port=relay_port,
        callee_port=callee_port + 1 if secure else callee_port,
        ca=test_ca.cert,
        cert=test_ca.issue("kamailio", "127.0.0.1", "localhost") if secure else None,
    )
    tls = {}
    if secure:
        relay_cert = test_ca.issue("relay", "127.0.0.1")
        tls = {
            "SIP_TLS_CA_FILE": test_ca.cert,
            "SIP_TLS_CERT_FILE": relay_cert.cert,
            "SIP_TLS_KEY_FILE": relay_cert.key,
            "SIP_SRTP": "required",
        }
    env = sip_env(
        workdir,
        kamailio.port,
        SIP_TRUNK_URI=f"{'sips' if secure else 'sip'}:127.0.0.1:{kamailio.port}",
        SIP_TRANSPORT=transport,
        SIP_BIND=f"127.0.0.1:{relay_port}",
        SIP_USERNAME=TRUNK_USER,
        SIP_PASSWORD=TRUNK_PASSWORD,
        SIP_INBOUND_SOURCES="127.0.0.1",
        SIP_RING_TIMEOUT=15,
        INBOUND_RING_SECONDS=1,
        **tls,
    )
    try:
        relay = RelayProcess(workdir, log=workdir / "relay.log", **env)
    except BaseException:
        kamailio.stop()
        raise
    # /healthz answers before the agent has bound its SIP port; a TCP INVITE then would be
    # refused (Kamailio's 477), where over UDP Kamailio's retransmission would hide it.
    listening = udp_port_taken if transport == "udp" else tcp_listening
    wait_until(lambda: listening(relay_port), deadline=30, what="the agent's SIP port")
    relay.workdir = workdir
    yield relay, kamailio, callee_port
    relay.stop()
    kamailio.stop()


@pytest.fixture
def relay(edge):
    return edge[0]


@pytest.fixture
def kamailio(edge):
    return edge[1]


@pytest.fixture
def phones(edge, tmp_path, transport, test_ca):
    """Start baresip: `phones("callee", number=CALLEE, source=..., answer=True)` takes the
    port Kamailio forwards callees to; any other is a caller on a port of its own. Over TLS
    each has a certificate of the test CA and requires SRTP, unless `srtp=False`. Stopped at
    teardown."""
    started = []
    callee_port = edge[2]

    def start(
        name: str, *, number: str, source: Path, answer: bool = False, srtp: bool = True
    ) -> Baresip:
        tls = None
        if transport == "tls":
            leaf = test_ca.issue(f"{tmp_path.name}-{name}", "127.0.0.1", "localhost")
            tls = (test_ca.cert, leaf.bundle)
        phone = Baresip(
            tmp_path / name,
            number=number,
            source=source,
            transport=transport,
            answer=answer,
            port=callee_port if name == "callee" else free_dual_port_pair(),
            tls=tls,
            mediaenc="srtp-mand" if tls and srtp else None,
        )
        started.append(phone)
        return phone

    yield start
    for phone in started:
        phone.stop()
