"""A Ray Serve deployment of speechc's Qwen3-TTS: the OpenAI speech route
(``POST /v1/audio/speech``) on as many replicas as the cluster has cores
for, each replica a process holding one ``speechc.Model``.

Requests are read by ``Model.parse_speech_request``, the parser of
``speechc serve`` (the same fields, limits and error messages: ``input``,
``voice``, ``response_format`` wav|pcm, ``speed`` 1.0, and speechc's
``language``, ``instruct``, ``seed``, sampling, ``max_frames``,
``stream``), and answered with the bytes ``speechc tts`` writes
(``speechc.wav_bytes``).  A bad request is HTTP 400 with an OpenAI-shaped
error body naming the field.

Run (README.md beside this file)::

    serve run speech_serve:app model=/models/tts.so threads=4 replicas=2
"""
from __future__ import annotations

import asyncio
import os
from typing import Any, AsyncIterator, Dict, Optional

from ray import serve
from ray.serve import Application
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

import speechc

ROUTE = "/v1/audio/speech"
MEDIA = {"wav": "audio/wav", "pcm": "audio/L16; rate=24000; channels=1"}


def _error(status: int, message: str, kind: str = "invalid_request_error") -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind}}, status_code=status)


@serve.deployment(name="speechc_tts", max_ongoing_requests=2)
class SpeechDeployment:
    """One replica: one ``speechc.Model`` (mmapped weights, a pool of
    sessions), serving up to ``max_ongoing_requests`` requests at once,
    each on its own session with ``threads`` kernel threads.  Give each
    replica ``num_cpus = threads`` (``app`` does) so that Ray places as many
    replicas on a node as it has cores for.

    Args:
        model: the ``.so`` built by ``speechc build`` (with ``.codec.so``
            and ``.tokenizer/`` beside it), at this path on every node.
        threads: kernel threads per session (and per codec session).
        max_frames: the most frames a request may ask for, and the default.
        decoder_batch: frames per codec call (0: the codec's maximum; 1:
            frame by frame, the bits ``Model.tts(..., decoder_batch=1)``
            gives, so that replies are reproducible to the bit).
    """

    def __init__(self, model: str, threads: int = 1, max_frames: int = 2048, decoder_batch: int = 0):
        self.model = speechc.Model(model, threads=threads, decoder_threads=threads)
        if self.model.info.family != "qwen3_tts" or not self.model.info.sample_rate:
            raise speechc.Error(1, f"{model}: not a Qwen3-TTS model with its codec decoder beside it")
        self.max_frames = max_frames
        self.decoder_batch = decoder_batch
        self.rate = self.model.info.sample_rate
        ctx = serve.get_replica_context()
        self.replica = getattr(ctx, "replica_tag", None) or str(getattr(ctx, "replica_id", os.getpid()))

    async def __call__(self, request: Request) -> Response:
        if request.url.path.rstrip("/") != ROUTE:
            return _error(404, f"no route {request.url.path} (POST {ROUTE})", "not_found")
        if request.method != "POST":
            return _error(405, f"{request.method} {ROUTE}: use POST")
        body = await request.body()
        try:
            req = self.model.parse_speech_request(body, self.max_frames)
        except speechc.Error as e:
            return _error(400, e.message)
        headers = {"X-Speechc-Replica": self.replica}
        opts: Dict[str, Any] = dict(req.options, decoder_batch=self.decoder_batch)
        if req.stream:
            return StreamingResponse(self._stream(req.input, opts, req.format), media_type=MEDIA[req.format],
                                     headers=headers)
        try:
            pcm, rate = await asyncio.to_thread(self.model.tts, req.input, **opts)
        except speechc.Error as e:
            return _error(400 if e.code == 1 else 500, e.message, "invalid_request_error" if e.code == 1 else
                          "server_error")
        data = speechc.wav_bytes(pcm, rate) if req.format == "wav" else speechc.s16le(pcm)
        return Response(data, media_type=MEDIA[req.format], headers=headers)

    async def _stream(self, text: str, opts: Dict[str, Any], fmt: str) -> AsyncIterator[bytes]:
        """The header of an unknown length (wav), then each frame's s16le
        as it is decoded; the generation stops if the client goes away."""
        if fmt == "wav":
            yield speechc.wav_header(self.rate)
        it = self.model.tts_stream(text, **opts)
        try:
            while True:
                chunk: Optional[Any] = await asyncio.to_thread(next, it, None)
                if chunk is None:
                    break
                yield speechc.s16le(chunk)
        finally:
            await asyncio.to_thread(it.close)


def app(args: Dict[str, str]) -> Application:
    """The application ``serve run speech_serve:app model=PATH [threads=N]
    [replicas=N] [max_frames=N] [decoder_batch=N] [max_ongoing=N]`` builds:
    ``replicas`` replicas (default 1) of ``threads`` CPUs each (default 1),
    on ``ROUTE``."""
    threads = int(args.get("threads", 1))
    return SpeechDeployment.options(
        num_replicas=int(args.get("replicas", 1)),
        ray_actor_options={"num_cpus": threads},
        max_ongoing_requests=int(args.get("max_ongoing", 2)),
    ).bind(args["model"], threads=threads, max_frames=int(args.get("max_frames", 2048)),
           decoder_batch=int(args.get("decoder_batch", 0)))
