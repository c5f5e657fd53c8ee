"""Moshi from Python (Model.moshi, Model.moshi_batch): the rows of the
`moshi` package's LMGen on the repository's tiny fixture, the batch equal
to each conversation alone, and the errors."""
import subprocess
import sys

import numpy as np
import pytest

import speechc
from conftest import REPO

FAMILY = REPO / "tests/data/moshi/family_tiny"


@pytest.fixture(scope="module")
def moshi_so(work):
    (work / "moshi").mkdir()
    return speechc.build(FAMILY, work / "moshi" / "m.so", codec=False)


@pytest.fixture(scope="module")
def moshi_model(moshi_so):
    with speechc.Model(moshi_so, threads=1) as m:
        yield m


def fixture_codes():
    """The fixture's user codes [10, 2] and the package's greedy rows [7, 5]."""
    user = np.fromfile(FAMILY / "user.i32", dtype="<i4").reshape(10, 2)
    rows = np.fromfile(FAMILY / "gen.i32", dtype="<i4").reshape(7, 5)
    return user, rows


def test_greedy_rows_are_the_packages(moshi_model):
    user, want = fixture_codes()
    with moshi_model.moshi(greedy=True) as conv:
        assert conv.info["user_codebooks"] == 2 and conv.info["dep_q"] == 4
        got = [conv.step(u) for u in user]
    assert got[:conv.info["max_delay"]] == [None] * conv.info["max_delay"]
    assert [r for r in got if r is not None] == want.tolist()


def test_push_and_seeds(moshi_model):
    user, want = fixture_codes()
    with moshi_model.moshi(greedy=True) as conv:
        assert conv.push(user) == want.tolist()
    with moshi_model.moshi(seed=7) as a, moshi_model.moshi(seed=7) as b, moshi_model.moshi(seed=8) as c:
        ra, rb, rc = a.push(user), b.push(user), c.push(user)
    assert ra == rb and ra != rc and ra != want.tolist()


def test_batch_is_each_alone(moshi_model):
    user, _ = fixture_codes()
    seeds, lengths = [1, 2, 3, 4], [10, 6, 3, 8]
    alone = []
    for sd, n in zip(seeds, lengths):
        with moshi_model.moshi(seed=sd) as conv:
            alone.append([conv.step(u) for u in user[:n]])
    convs = [moshi_model.moshi(seed=sd) for sd in seeds]
    got = [[] for _ in seeds]
    with moshi_model.moshi_batch() as b:
        # two start at once, a third at step 2, the fourth when the third ends
        b.add(convs[0])
        b.add(convs[1])
        for t in range(14):
            if t == 2:
                b.add(convs[2])
            if t == 5:
                b.add(convs[3])
            active = b.conversations
            if not active:
                break
            rows = b.step([user[len(got[convs.index(c)])] for c in active])
            for c, r in zip(active, rows):
                i = convs.index(c)
                got[i].append(r)
                if len(got[i]) == lengths[i]:
                    b.remove(c)
    assert got == alone
    for c in convs:
        c.close()


def test_errors(moshi_model, llm_model):
    with pytest.raises(speechc.Error, match="not a Moshi model"):
        llm_model.moshi()
    with pytest.raises(speechc.Error, match="not a Moshi model"):
        llm_model.moshi_batch()
    with pytest.raises(speechc.Error, match="temp"):
        moshi_model.moshi(temp=-1)
    conv = moshi_model.moshi(greedy=True)
    with pytest.raises(speechc.Error, match="expected 2 user codes"):
        conv.step([1, 2, 3])
    with pytest.raises(speechc.Error, match="outside"):
        conv.step([0, 10**6])
    assert conv.step([0, 1]) is None  # the refused step moved nothing
    with moshi_model.moshi_batch() as b:
        b.add(conv)
        with pytest.raises(speechc.Error, match="already"):
            b.add(conv)
        with pytest.raises(speechc.Error, match="one list of user codes per conversation"):
            b.step([])
        conv.close()  # leaves the batch
        assert b.conversations == []
    with pytest.raises(speechc.Error, match="closed"):
        conv.step([0, 1])


def test_user_codes_are_integers(moshi_model):
    """A float or a string among the user's codes is refused, not cut to
    an integer; numpy integers are fine."""
    with moshi_model.moshi(greedy=True) as conv:
        U = conv.info["user_codebooks"]
        for bad in ([0.5] * U, ["1"] * U):
            with pytest.raises(speechc.Error, match="integer"):
                conv.step(bad)
        conv.step(np.zeros(U, dtype=np.int64))


def test_closing_the_model_closes_conversations(moshi_so):
    m = speechc.Model(moshi_so, threads=1)
    conv, b = m.moshi(), m.moshi_batch()
    b.add(conv)
    m.close()
    with pytest.raises(speechc.Error, match="closed"):
        conv.step([0, 1])
    with pytest.raises(speechc.Error, match="closed"):
        b.step([[0, 1]])


DUPLEX = REPO / "tests/data/moshi/duplex_tiny"


@pytest.fixture(scope="module")
def duplex_so(work):
    (work / "duplex").mkdir()
    return speechc.build(DUPLEX, work / "duplex" / "m.so")  # + m.codec.so, its Mimi


def test_push_pcm_is_the_packages_and_the_cli(duplex_so, tmp_path):
    from conftest import read_wav, run_cli
    pcm, rate = read_wav(DUPLEX / "in.wav")
    want_rows = np.fromfile(DUPLEX / "tokens.i32", dtype="<i4").reshape(8, 5).tolist()
    want_pcm = np.fromfile(DUPLEX / "reply.f32", dtype="<f4")
    with speechc.Model(duplex_so, threads=1) as m, speechc.Model(duplex_so.with_suffix(".codec.so"),
                                                                  threads=1) as mimi:
        with m.moshi(greedy=True) as conv:
            rows, reply = conv.push_pcm(pcm, mimi)
        assert rows == want_rows
        assert np.abs(reply - want_pcm).max() <= 1e-4 * np.abs(want_pcm).max()
        run_cli("moshi", duplex_so, "--input", DUPLEX / "in.wav", "-o", tmp_path / "r.wav", "--f32", "--greedy", "-q")
        cli, _ = read_wav(tmp_path / "r.wav")
        assert cli.tobytes() == reply.tobytes()
        # in pieces (3 frames, then the rest), the same
        with m.moshi(greedy=True) as conv:
            r1, p1 = conv.push_pcm(pcm[:3 * 1920], mimi)
            r2, p2 = conv.push_pcm(pcm[3 * 1920:], mimi)
        assert r1 + r2 == rows and np.concatenate([p1, p2]).tobytes() == reply.tobytes()
        conv = m.moshi(greedy=True)
        with pytest.raises(speechc.Error, match="partial frame"):
            conv.push_pcm(pcm[:1000], mimi)
        with pytest.raises(speechc.Error, match="not a codec"):
            conv.push_pcm(pcm, m)
    with pytest.raises(speechc.Error, match="closed"):  # closing the model closed it
        conv.push_pcm(pcm, mimi)


def test_model_freed_in_a_cycle_at_exit(duplex_so):
    """At interpreter exit (or a cycle the garbage collector breaks) the
    weak sets that tie conversations to their models are cleared before
    any __del__ runs: the models must still free every handle they lent
    before themselves, and nothing after.  Run in a child: a use after
    free there is a crash here (it was, every run, before)."""
    code = (
        "import numpy as np, speechc\n"
        f"m = speechc.Model({str(duplex_so)!r}, threads=1)\n"
        f"mimi = speechc.Model({str(duplex_so.with_suffix('.codec.so'))!r}, threads=1)\n"
        "conv = m.moshi(); conv.push_pcm(np.zeros(1920, np.float32), mimi)\n"
        "b = m.moshi_batch(); c2 = m.moshi(); b.add(c2)\n"
        "def main(): pass\n"  # module globals in a cycle with this function
        "print('ok')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-2000:])
