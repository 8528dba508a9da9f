package replay

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFreshFeaturesAtSubmit: re-predicting a pending job reads its features
// as the model's rows have them, with the user's state at the job's submit:
// with nothing ended or submitted since, they are the features it had at
// submit. Reading them from the history as it is counted the job itself in
// flight and made the time since the user's last submit 0.
func TestFreshFeaturesAtSubmit(t *testing.T) {
	w := workload([]VC{{"v", 1, 8}}, []hj{
		{id: "a", user: "u", submit: 0, gpus: 1, run: 100},
		{id: "b", user: "u", submit: 10, gpus: 1, run: 200},
		{id: "c", user: "u", submit: 1000, gpus: 1, run: 300},
	})
	o := newOnline(w, 50000, 30000)
	o.predict(0)
	o.predict(1)
	o.observe(0, w.Jobs[0].Submit+100)
	o.observe(1, w.Jobs[1].Submit+200)
	o.predict(2)
	d := o.djob(2)
	d.Run = 0
	if got, want := o.freshFeatures(&d, 2).X, o.feats[2].X; !slices.Equal(got[:], want[:]) {
		t.Errorf("job c's features when re-predicted\n%v\nwant those at its submit\n%v", got, want)
	}
}

// TestRefreshSchedules: a re-prediction that moves a job to the head of its
// VC's queue lets it start then if it fits, not at the VC's next end or
// arrival. VC 1 holds u7's job a (5 s); in VC 0, b holds 3 of 4 GPUs until
// 1000, c (2 GPUs, 100 s) waits for them, and u7's d (1 GPU, limit 10,000 s,
// 10 s) waits behind c on its cold-start prediction (its limit: 10,000 GPU·s
// against c's 200). When a ends at 5, u7's history re-predicts d at about
// 5 s: ahead of c, and it fits, so it starts at 5. JCTs 5, 1000, 1099, 13.
func TestRefreshSchedules(t *testing.T) {
	w := workload([]VC{{"v0", 1, 4}, {"v1", 1, 4}}, []hj{
		{id: "a", user: "u7", vc: 1, submit: 0, gpus: 1, run: 5, req: 10000},
		{id: "b", user: "u8", vc: 0, submit: 0, gpus: 3, run: 1000, req: 1000},
		{id: "c", user: "u9", vc: 0, submit: 1, gpus: 2, run: 100, req: 100},
		{id: "d", user: "u7", vc: 0, submit: 2, gpus: 1, run: 10, req: 10000},
	})
	res, err := Run(t.Context(), w, QSSF, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Start[3] - w.Jobs[3].Submit + 2; got != 5 {
		t.Errorf("job d started at %d; want 5, when a's end re-predicted it", got)
	}
	if want := (5 + 1000 + 1099 + 13) / 4.0; math.Abs(res.AvgJCT-want) > 1e-9 {
		t.Errorf("avg JCT %v; want %v", res.AvgJCT, want)
	}
}

// TestJitter: --qssf.jitter multiplies each job's prediction by a factor
// within e^±jitter, the same for every re-prediction of the job, drawn from
// the seed (another seed, other factors; both signs), capped at the limit;
// 0 leaves predictions as made, and the replay's figures with them.
func TestJitter(t *testing.T) {
	o := &online{jitter: 0.01, seed: 1}
	p := 1000 * time.Second
	lo, hi := time.Duration(float64(p)*math.Exp(-0.01)), time.Duration(float64(p)*math.Exp(0.01))
	var up, down, same int
	for j := range 1000 {
		got := o.jittered(j, p, 0)
		if got < lo || got > hi {
			t.Fatalf("job %d: %v; want within %v..%v", j, got, lo, hi)
		}
		if again := o.jittered(j, p, 0); again != got {
			t.Fatalf("job %d: %v, then %v; want the same factor each time", j, got, again)
		}
		if other := (&online{jitter: 0.01, seed: 2}).jittered(j, p, 0); other == got {
			same++
		}
		if got > p {
			up++
		} else if got < p {
			down++
		}
		if capped := o.jittered(j, p, p); capped > p {
			t.Fatalf("job %d: %v above its limit %v", j, capped, p)
		}
	}
	if up < 400 || down < 400 || same > 10 {
		t.Errorf("%d jobs up, %d down, %d the same under another seed; want about 500, 500, 0", up, down, same)
	}
	if got := (&online{seed: 1}).jittered(3, p, 0); got != p {
		t.Errorf("jitter 0: %v; want %v", got, p)
	}

	w := workload([]VC{{"v", 1, 8}}, []hj{
		{id: "a", user: "u", submit: 0, gpus: 8, run: 100},
		{id: "b", user: "u", submit: 1, gpus: 4, run: 50},
		{id: "c", user: "w", submit: 2, gpus: 4, run: 300},
	})
	plain, err := Run(t.Context(), w, QSSF, Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []Config{{Jitter: 0, JitterSeed: 9}, {Jitter: -0.1}, {Jitter: 1.5}, {Jitter: math.NaN()}} {
		got, err := Run(t.Context(), w, QSSF, c)
		if c.Jitter != 0 {
			if err == nil || !strings.Contains(err.Error(), "jitter") {
				t.Errorf("jitter %v: error %v; want one naming the jitter", c.Jitter, err)
			}
			continue
		}
		if err != nil || got.AvgJCT != plain.AvgJCT {
			t.Errorf("jitter 0: avg JCT %v, %v; want %v", got.AvgJCT, err, plain.AvgJCT)
		}
	}
}
