"""The Ray Serve deployment on a local Ray cluster bound to loopback: two
replicas, concurrent requests, every reply checked against Model.tts with
the same seed (scripts/ray_test.sh runs it)."""
import concurrent.futures
import json
import os
import socket
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "python" / "tests"))  # the package tests' fixtures
sys.path.insert(0, str(HERE))

import speechc  # noqa: E402
from conftest import build_tiny_tts, read_wav  # noqa: E402

ray = pytest.importorskip("ray")
from ray import serve  # noqa: E402

TEXTS = ["Hello from Ray", "A second voice", "Three", "Fourth request here", "five", "six six", "seven", "eight"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A one-node Ray cluster on 127.0.0.1, Serve's proxy on a free loopback
    port, the deployment with two replicas of one CPU each."""
    work = tmp_path_factory.mktemp("ray")
    model = build_tiny_tts(work)
    # the workers import speech_serve (and speechc, installed in this venv)
    os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False,
             _temp_dir=str(work / "ray"))
    port = free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    import speech_serve
    serve.run(speech_serve.app({"model": str(model), "threads": "1", "replicas": "2", "max_frames": "64",
                                "decoder_batch": "1", "max_ongoing": "2"}), route_prefix="/")
    yield model, f"http://127.0.0.1:{port}/v1/audio/speech"
    serve.shutdown()
    ray.shutdown()


def post(url, body, timeout=120):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def test_concurrent_requests_match_model(cluster, tmp_path):
    model_path, url = cluster
    bodies = [dict(input=t, voice="tiny_speaker", language="english", seed=i, max_frames=16,
                   response_format="wav" if i % 2 == 0 else "pcm") for i, t in enumerate(TEXTS)]
    bodies.append(dict(input="streamed", voice="tiny_dialect", seed=42, max_frames=16, stream=True))
    with concurrent.futures.ThreadPoolExecutor(len(bodies)) as pool:
        replies = list(pool.map(lambda b: post(url, b), bodies))
    replicas = set()
    with speechc.Model(model_path, threads=1) as m:
        for body, (status, headers, data) in zip(bodies, replies):
            assert status == 200, data[:300]
            replicas.add(headers["X-Speechc-Replica"])
            pcm, rate = m.tts(body["input"], speaker=body["voice"], language=body.get("language"),
                              seed=body["seed"], max_frames=16, decoder_batch=1)
            assert pcm.size > 0
            if body.get("stream"):
                # the header of a stream of unknown length, then s16le frames
                assert data == speechc.wav_header(rate) + speechc.s16le(pcm)
            elif body["response_format"] == "wav":
                assert headers["Content-Type"].startswith("audio/wav")
                assert data == speechc.wav_bytes(pcm, rate)
                f = tmp_path / "r.wav"
                f.write_bytes(data)
                s16, r2 = read_wav(f)
                assert r2 == rate and s16.size == pcm.size
            else:
                assert data == speechc.s16le(pcm)
    assert len(replicas) == 2, f"served by {replicas}"


def test_bad_requests_are_400_and_serving_goes_on(cluster):
    _, url = cluster
    for body, msg in (({"input": "x", "voice": "nobody"}, "tiny_speaker"), ({"input": "x", "speed": 1.5}, "speed"),
                      ({"input": "x", "response_format": "mp3"}, "mp3"), ({"input": "x", "max_frames": 65}, "max_frames"),
                      ({"inptu": "x"}, "inptu")):
        status, _, data = post(url, body)
        assert status == 400, data
        err = json.loads(data)["error"]
        assert msg in err["message"] and err["type"] == "invalid_request_error"
    req = urllib.request.Request(url, data=b"{not json", headers={"Content-Type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=60)
    assert e.value.code == 400
    status, _, data = post(url, dict(input="still here", voice="tiny_speaker", seed=1, max_frames=4))
    assert status == 200 and data[:4] == b"RIFF"
