/*
 * tts_audio.c — the audio half of sc_tts_generate: codec frames in, PCM out
 * through on_audio, overlapped with generation.
 *
 * The generator writes frame t's codes into its output matrix, then calls
 * tts_audio_push(t).  Overlapped (the default), a decoder thread that owns
 * the codec session takes the frames pushed and not yet decoded, up to
 * `batch` per sc_codec_decode call, and hands each frame's PCM to on_audio
 * in order; it sleeps on a condition variable while nothing is queued.
 * The queue is the codes matrix itself: rows below `pushed` are final and
 * only read by the decoder, so nothing is copied.  It is bounded: push
 * waits while the generator is `cap` frames ahead of the audio (so a
 * decoder that falls behind gets the cores, and the latency from a frame's
 * generation to its audio stays bounded).
 *
 * Stops, either side: the decoder stops on a codec error or a non-zero
 * on_audio, and push (or tts_audio_next, which the generator calls
 * before each frame) then answers non-zero, so the generator stops before
 * its next frame.  The generator's own stop or error goes through
 * tts_audio_finish, which lets the decoder finish the frames already
 * pushed, then joins it: what was generated before a stop is heard, as in
 * the sequential order.  Nothing waits on a side that has stopped.
 *
 * Sequential (sc_tts_params.audio_sequential, or when the thread cannot be
 * started): push decodes frame t and calls on_audio on the generator's
 * thread before it returns, one frame per call: the order before the
 * decoder thread.
 */
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pool.h"
#include "tts_internal.h"

struct TtsAudio {
  sc_session *codec;         /* owned by the decoder while it runs */
  const sc_tts_params *p;    /* on_audio, audio_user */
  const int32_t *codes;      /* [max_frames, G]: the generator's output; rows < pushed are final */
  int G, spf;                /* codes per frame, samples per frame */
  int batch;                 /* frames per codec call, at most */
  int cap;                   /* frames the generator may be ahead of the audio */
  double start;              /* CLOCK_MONOTONIC seconds at the sc_tts_generate call */
  float *pcm;                /* [batch * spf] */
  int threaded;
  sc_pool *gen_pool, *dec_pool; /* the two sessions' kernel threads (NULL: none) */
  int gen_share, dec_share;  /* threads each uses while the other side runs */
  pthread_t tid;
  pthread_mutex_t mu;
  pthread_cond_t more;       /* frames pushed, or generation over */
  pthread_cond_t room;       /* frames delivered, or the decoder stopped */
  /* under mu */
  int pushed;                /* frames the generator handed over */
  int delivered;             /* frames decoded and given to on_audio */
  int gen_done;              /* the generator pushes no more */
  int stopped;               /* the decoder stopped: error or on_audio's stop */
  int first_decoded;         /* frame 0's PCM is computed */
  int gen_waiting;           /* the generator waits in tts_audio_push */
  /* the decoder's own (read after the join, or on the one thread) */
  int rc;
  sc_error err;
  double decoder_s, first_audio_s;
  int calls;
  int heard;                 /* frames decoded and handed to on_audio */
};

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Decode frames [t0, t0 + n) in one codec call and hand each to on_audio.
 * Non-zero when the audio stops: a codec error (a->rc, a->err) or
 * on_audio's non-zero return. */
static int decode_frames(TtsAudio *a, int t0, int n) {
  const int32_t *f = a->codes + (size_t)t0 * a->G;
  const double s0 = now();
  if ((a->rc = sc_codec_decode(a->codec, f, n, a->pcm, &a->err))) return 1;
  const double s1 = now();
  a->decoder_s += s1 - s0;
  a->calls++;
  if (!t0) {
    a->first_audio_s = s1 - a->start;
    if (a->threaded) { /* the generator may go on (tts_audio_push) */
      pthread_mutex_lock(&a->mu);
      a->first_decoded = 1;
      pthread_cond_signal(&a->room);
      pthread_mutex_unlock(&a->mu);
    }
  }
  for (int i = 0; i < n; i++) {
    a->heard++;
    if (a->p->on_audio &&
        a->p->on_audio(a->p->audio_user, f + (size_t)i * a->G, a->G, a->pcm + (size_t)i * a->spf, a->spf, t0 + i))
      return 1;
  }
  return 0;
}

static void *decoder_main(void *arg) {
  TtsAudio *a = arg;
  pthread_mutex_lock(&a->mu);
  for (;;) {
    while (a->pushed == a->delivered && !a->gen_done) pthread_cond_wait(&a->more, &a->mu);
    const int t0 = a->delivered, n = a->pushed - t0 < a->batch ? a->pushed - t0 : a->batch;
    if (!n) break; /* generation over, every frame delivered */
    const int alone = a->gen_waiting || a->gen_done;
    pthread_mutex_unlock(&a->mu);
    sc_pool_limit(a->dec_pool, alone ? INT_MAX : a->dec_share);
    const int stop = decode_frames(a, t0, n);
    pthread_mutex_lock(&a->mu);
    a->delivered = t0 + n;
    a->stopped = stop;
    pthread_cond_signal(&a->room);
    if (stop) break;
  }
  pthread_mutex_unlock(&a->mu);
  return NULL;
}

int tts_audio_start(sc_session *codec, const sc_tts_params *p, sc_session *gen, const int32_t *codes, int G,
                    double start, TtsAudio **out, sc_error *err) {
  *out = NULL;
  sc_codec_info ci;
  if (sc_codec_get_info(codec->m, &ci, err)) return err->code;
  if (ci.n_codebooks != G)
    return sc_fail(err, SC_EUSAGE, "%s decodes frames of %d codes but %s makes %d", codec->m->path,
                   ci.n_codebooks, gen->m->path, G);
  if (p->audio_batch < 0) return sc_fail(err, SC_EUSAGE, "audio_batch must be >= 0, got %d", p->audio_batch);
  TtsAudio *a = calloc(1, sizeof *a);
  if (!a) return sc_fail(err, SC_ERUNTIME, "out of memory");
  a->codec = codec;
  a->p = p;
  a->codes = codes;
  a->G = G;
  a->spf = ci.samples_per_frame;
  a->batch = p->audio_sequential ? 1 : p->audio_batch ? p->audio_batch : ci.max_frames;
  if (a->batch > ci.max_frames) a->batch = ci.max_frames; /* what one call can take */
  if (a->batch > p->max_frames) a->batch = p->max_frames > 0 ? p->max_frames : 1;
  a->cap = 2 * a->batch;
  a->start = start;
  /* While both sides run, when their pools hold more threads than there
   * are cores, each keeps its share (the decoder half the cores, the
   * generator the rest, one at least) and the rest sleep, rather than four
   * threads spinning in each other's barriers on two cores.  A side takes
   * every thread while the other is idle: the generator for a frame that
   * starts with nothing queued or being decoded (tts_audio_next), the
   * decoder for a batch that starts while the generator waits (too far
   * ahead, frame 0) or is done.  Each side sets only its own pool. */
  a->gen_pool = gen->kctx.pool;
  a->dec_pool = codec->kctx.pool;
  const int cores = sc_physical_cores(), tg = sc_pool_threads(a->gen_pool), td = sc_pool_threads(a->dec_pool);
  a->gen_share = tg, a->dec_share = td;
  if (tg + td > cores && !p->audio_no_share) {
    a->dec_share = td < cores / 2 ? td : cores / 2 > 1 ? cores / 2 : 1;
    a->gen_share = tg < cores - a->dec_share ? tg : cores - a->dec_share > 1 ? cores - a->dec_share : 1;
  }
  if (!(a->pcm = malloc((size_t)a->batch * a->spf * sizeof *a->pcm))) {
    free(a);
    return sc_fail(err, SC_ERUNTIME, "out of memory");
  }
  sc_session_reset(codec);
  pthread_mutex_init(&a->mu, NULL);
  pthread_cond_init(&a->more, NULL);
  pthread_cond_init(&a->room, NULL);
  /* no thread, no overlap: the sequential order, same audio */
  a->threaded = !p->audio_sequential && !pthread_create(&a->tid, NULL, decoder_main, a);
  *out = a;
  return SC_OK;
}

int tts_audio_push(TtsAudio *a, int t) {
  if (!a->threaded) {
    if (a->stopped) return 1;
    a->stopped = decode_frames(a, t, 1);
    a->delivered = t + 1;
    return a->stopped;
  }
  pthread_mutex_lock(&a->mu);
  a->gen_waiting = 1;
  while (!a->stopped && t - a->delivered >= a->cap) pthread_cond_wait(&a->room, &a->mu);
  if (!a->stopped) {
    a->pushed = t + 1;
    pthread_cond_signal(&a->more);
  }
  /* frame 0 is decoded before frame 1 is generated, with every thread:
   * the first audio comes as soon as in the sequential order */
  while (!t && !a->stopped && !a->first_decoded) pthread_cond_wait(&a->room, &a->mu);
  a->gen_waiting = 0;
  const int stop = a->stopped;
  pthread_mutex_unlock(&a->mu);
  return stop;
}

int tts_audio_next(TtsAudio *a) {
  if (!a->threaded) return a->stopped;
  pthread_mutex_lock(&a->mu);
  const int stop = a->stopped, busy = a->pushed > a->delivered;
  pthread_mutex_unlock(&a->mu);
  sc_pool_limit(a->gen_pool, busy ? a->gen_share : INT_MAX);
  return stop;
}

int tts_audio_finish(TtsAudio *a, sc_tts_stats *st, sc_error *err) {
  if (!a) return SC_OK;
  if (a->threaded) {
    pthread_mutex_lock(&a->mu);
    a->gen_done = 1;
    pthread_cond_signal(&a->more);
    pthread_mutex_unlock(&a->mu);
    pthread_join(a->tid, NULL);
    sc_pool_limit(a->gen_pool, INT_MAX); /* every thread again */
    sc_pool_limit(a->dec_pool, INT_MAX);
  }
  const int rc = a->rc;
  if (rc && err) *err = a->err;
  if (st) {
    st->decoder_s = a->decoder_s;
    st->first_audio_s = a->first_audio_s;
    st->decoder_calls = a->calls;
    st->decoded = a->heard;
    st->overlapped = a->threaded;
  }
  pthread_mutex_destroy(&a->mu);
  pthread_cond_destroy(&a->more);
  pthread_cond_destroy(&a->room);
  free(a->pcm);
  free(a);
  return rc;
}
