/*
 * The lease protocol of cronlease, for SPIN (docs/design.md, "What the model checks").
 *
 * One task, NR = 2 replicas, slots 1..NS, attempts 1..NA. Every step that touches the
 * database is atomic: the database executes a statement or a transaction as one step,
 * at its own clock `now`. Each replica is one process choosing, at every step, among
 * the next actions of its threads (acquirer, worker, heartbeat, attempt poll), so every
 * interleaving of their statements is explored; a process that is not scheduled while
 * the clock advances is a paused (SIGSTOPped, swapping) process that resumes later.
 *
 * Every database step names the statement it abstracts and declares its guard on a
 * "guard:" line; tests/unit/test_lease_model.py compares those lines with the WHERE
 * clauses of the compiled PostgreSQL statements, so a guard cannot change in one
 * place only. Every step prints one line when a trail is replayed (spin -t), which
 * tests/support/spin_model.py turns into the counterexample's story; pan prints nothing.
 *
 * Mutations, one at a time (spin -DNAME): NO_EXPIRY, NO_REACQUIRE_EXPIRY, NO_HB_FENCE,
 * NO_NONCE_CHECK, NO_SLOT_CURSOR, NO_HOLDER_MATCH, REFENCE_FENCE_MATCH, NO_REASSERT_FENCE,
 * NO_GIVE_BACK. LOST_WRITES adds a standby that misses commits and one failover to it;
 * the properties that hold only without lost writes are then checked only until the
 * failover (SAFE_WITHOUT_LOSS). P2_LOST (with LOST_WRITES) checks P2 to the end for
 * living holders: runs not told they lost their lease (gone), except a run started by a
 * replica that had not seen the other run's lease (BLIND) or beside a lease whose
 * renewals the failover lost (SHORT); design §10.2.
 *
 * Progress (docs/design.md, "Liveness"): WATCH=W schedules the stuck watcher at least
 * every W ticks (the clock does not pass a tick without a pass) and checks that a run
 * whose replica crashed is marked within W ticks of its lease's expiry (P6; mutation
 * NO_WATCHER_EXPIRY). LIVENESS adds WATCH=1, renewals only when due (once per tick),
 * R0 never crashing (R1 may), and the claim L1 below, checked for acceptance cycles
 * under weak fairness (pan -a -f); mutation NO_GIVE_UP: a recovery that waits for its
 * own row instead of sending again or giving up.
 *
 * RUN_NOW adds one manual run (run_now: slot -1), by either replica; checked with NS=1;
 * mutation NO_MANUAL_EXPIRY: the manual acquisition takes an unexpired lease.
 */

#define NR 2            /* the overlap property below names both replicas */
#ifndef NS
#define NS 2
#endif
#define NA 2            /* attempt 1: the tick's acquisition; 2: one retry or recovery */
#ifndef GAP
#define GAP 2           /* clock ticks between slots: slot s is due at s * GAP */
#endif
#ifndef TTL
#define TTL 2           /* lease length */
#endif
#define TOL 0           /* future-slot tolerance, in ticks */
#define CLOCK_ERR 1     /* a replica's clock error: its timer fires up to this early */
#ifndef MAXT
#define MAXT 6          /* the clock stops here: the horizon of the exhaustive check */
#endif
#ifdef LIVENESS
#ifndef WATCH
#define WATCH 1
#endif
#define CAN_CRASH(r) ((r) == 1)     /* R0 stays up */
#else
#define CAN_CRASH(r) 1
#endif
#ifndef MAXCRASH
#define MAXCRASH 1
#endif
#define RUNS (NS * NA)
/* RUN_NOW: one manual run (run_now), its own run row after the scheduled ones */
#ifdef RUN_NOW
#define ROWS (RUNS + 1)
#else
#define ROWS RUNS
#endif
#define MIX RUNS        /* the manual run's row */
#define RIX(s, a) (((s) - 1) * NA + (a) - 1)

/* run outcomes (cronlease/_lease/outcomes.py) */
#define NONE 0
#define RUNNING 1
#define DONE 2
#define FAILED 3
#define ABANDONED 4
#define LOST 5
#define MISSED 6        /* a slot given up: won, never run (LostWrites._renumber_or_give_up) */

/* a replica's phase */
#define IDLE 0
#define UNKNOWN 1       /* an acquisition's connection broke: its outcome is not known */
#define REFENCE 2       /* won with a fence this replica saw issued before */
#define RUN 3           /* its worker executes the task */
#define CAND 4          /* read an attempt candidate; about to reacquire */
#define GIVEBACK 5      /* won with a fence seen issued before, while that lease may still be held */

/* The guards a mutation removes (one at a time): each is 1 under its mutation. */
#ifdef NO_EXPIRY
#define G_EXPIRED 1
#else
#define G_EXPIRED (l_exp < now)
#endif
#ifdef NO_MANUAL_EXPIRY
#define G_MANUAL_EXPIRED 1
#else
#define G_MANUAL_EXPIRED (l_exp < now)
#endif
#ifdef NO_REACQUIRE_EXPIRY
#define G_CAS_EXPIRED 1
#else
#define G_CAS_EXPIRED (l_exp < now)
#endif
#ifdef NO_SLOT_CURSOR
#define G_CURSOR(s) 1
#else
#define G_CURSOR(s) (l_slot < (s))
#endif
#ifdef NO_NONCE_CHECK
#define G_NONCE(n) 1
#else
#define G_NONCE(n) (l_holder == (n))
#endif
#if defined(NO_HB_FENCE)
#define G_HB(r) 1
#elif defined(NO_HOLDER_MATCH)
#define G_HB(r) (l_fence == lf[r])
#else
#define G_HB(r) (l_fence == lf[r] && l_holder == ln[r])
#endif
#ifdef NO_HOLDER_MATCH
#define G_HOLDER(h, r) 1
#else
#define G_HOLDER(h, r) ((h) == ln[r])
#endif
/* REFENCE_FENCE_MATCH: the renumbering as it was before SPIN's finding (design §10.4) */
#ifdef REFENCE_FENCE_MATCH
#define G_REFENCE(r) (l_fence == lf[r] && l_holder == ln[r])
#else
#define G_REFENCE(r) (l_holder == ln[r])
#endif
/* NO_REASSERT_FENCE: the holder writes its lease back whenever its renewal fails */
#ifdef NO_REASSERT_FENCE
#define G_REASSERT(r) 1
#else
#define G_REASSERT(r) (l_fence < lf[r])
#endif
#ifdef NO_WATCHER_EXPIRY
#define G_STUCK_EXPIRED 0
#else
#define G_STUCK_EXPIRED (l_exp < now)
#endif

/* --- the database: the lease row and the run rows, indexed by (slot, attempt) ------ */
bool l_exists;
byte l_holder;          /* the winning attempt's nonce (the holder#nonce column) */
byte l_fence;
byte l_slot;            /* the slot cursor */
byte l_exp;             /* expires_at */
byte r_out[ROWS];
byte r_fence[ROWS];
byte r_holder[ROWS];
byte now = 0;           /* the database clock */

#ifdef LOST_WRITES
/* the standby: the primary as of the last commit it received */
bool s_exists; byte s_holder; byte s_fence; byte s_slot; byte s_exp;
byte s_out[ROWS]; byte s_rfence[ROWS]; byte s_rholder[ROWS];
bool failed_over;
#define SAFE_WITHOUT_LOSS(p) (failed_over || (p))
#else
#define SAFE_WITHOUT_LOSS(p) (p)
#endif

/* --- each replica's memory ---------------------------------------------------------- */
byte ph[NR];
byte next_s[NR];        /* the slot its timer fires next */
byte lf[NR]; byte ln[NR]; byte ls[NR]; byte la[NR];     /* its lease: fence, nonce, slot, attempt */
byte req_s[NR]; byte req_n[NR]; byte req_a[NR]; byte req_f[NR];   /* a request in flight */
bool req_m[NR]; bool lm[NR];    /* the request, the lease: manual (run_now, slot -1) */
byte manuals = 0;               /* run_now requests made (at most one) */
/* the run row of replica r's lease */
#define ROW(r) (lm[r] -> MIX : RIX(ls[r], la[r]))
byte seen_s[NR]; byte seen_f[NR];                       /* watermark.py */
/* Seen.held_until: the expiry of the lease of seen_f as last seen held by another
   attempt, 0 if none (a held lease expires at 2 or later); only with LOST_WRITES, where
   it decides something (a win with a fence not above the one seen) */
byte seen_h[NR];
/* Seen.held_for(TTL): the lease seen may still be held, until its expiry plus one TTL */
#define HELD(r) (seen_h[r] && seen_h[r] + TTL >= now)
byte nonces = 0;        /* the last nonce handed out: a nonce is never reused */
byte crashes = 0;

/* --- ghosts: what really happened, for the properties -------------------------------- */
bool exec[NR];          /* its worker executes the task */
byte until[NR];         /* the expires_at the database last granted its lease */
byte started[ROWS];     /* worker starts per (slot, attempt), all replicas */
byte own_started[NR * ROWS];    /* the same per replica, since its last restart */
byte issued = 0;        /* the highest fence the database issued */
byte last_fence[NR];    /* the fence of the replica's previous run since its last restart */
#ifdef P2_LOST
byte seen_n[NR];        /* the nonce of the lease of seen_f, as seen */
byte wseen[NR]; byte wseen_n[NR];   /* seen_f and seen_n when it won its lease */
/* its run started beside a live run (of the other replica) whose fence it had not seen
   (BLIND), or whose renewals the failover lost, the lease row showing it expired early
   (SHORT) */
byte beside[NR];
#define BLIND 1
#define SHORT 2
bool cut[NR];         /* the failover put its lease back with an earlier expiry */
bool gone[NR];          /* its run was told it lost its lease (ctx.lost, sticky): a renewal
                           refused, or one after its lease expired */
#define GONE(r) gone[r] = 1
#define LAPSED(r) if :: until[r] < now -> gone[r] = 1 :: else fi
#define BESIDE(r) \
    if \
    :: exec[1 - (r)] && until[1 - (r)] >= now && !gone[1 - (r)] \
        && (wseen[r] < lf[1 - (r)] || wseen[r] == lf[1 - (r)] && wseen_n[r] != ln[1 - (r)]) -> beside[r] = BLIND \
    :: exec[1 - (r)] && until[1 - (r)] >= now && !gone[1 - (r)] && cut[1 - (r)] -> beside[r] = SHORT \
    :: else \
    fi
#define WSEEN(r) wseen[r] = seen_f[r]; wseen_n[r] = seen_n[r]
#define SEEN_N(r, n) seen_n[r] = (n)
#define UNBLIND(r) beside[r] = 0; wseen[r] = 0; wseen_n[r] = 0; gone[r] = 0; cut[r] = 0
#define SHORTEN(r) \
    if :: exec[r] && s_exists && s_fence == lf[r] && s_holder == ln[r] && s_exp < until[r] -> cut[r] = 1 \
    :: else fi
#define RENEWED(r) cut[r] = 0
#else
#define GONE(r) skip
#define LAPSED(r) skip
#define BESIDE(r) skip
#define WSEEN(r) skip
#define SEEN_N(r, n) skip
#define UNBLIND(r) skip
#define SHORTEN(r) skip
#define RENEWED(r) skip
#endif

#ifdef WATCH
byte watched = 0;       /* the time of the stuck watcher's last pass */
byte dead_from[ROWS];   /* a run whose replica crashed: the first tick it is stuck at */
#endif
#ifdef LIVENESS
byte decided = 0;       /* per slot (bit s - 1): R0 started it, or skipped it with a reason */
#define ALL_SLOTS ((1 << NS) - 1)
#define DECIDE(s) if :: r == 0 -> decided = decided | (1 << ((s) - 1)) :: else fi
/* heartbeat.py renews a lease when it is due, not in a loop: once per tick here; a
   refused renewal is the lease lost, and it is not renewed again */
bool hb_lost[NR];
#define HB_DUE(r) (until[r] < now + TTL && !hb_lost[r])
#define HB_LOST(r) hb_lost[r] = 1
#define HB_RESET(r) hb_lost[r] = 0
#else
#define DECIDE(s) skip
#define HB_DUE(r) 1
#define HB_LOST(r) skip
#define HB_RESET(r) skip
#endif

/* the run row of a candidate: attempt 1 of the cursor's slot, of the row's fence and holder,
   failed, or running/abandoned under an expired lease (attempt 2 is the last: NA) */
#define CAND_ROW RIX(l_slot, 1)
#define CANDIDATE (l_exists && l_slot > 0 && r_fence[CAND_ROW] == l_fence \
    && r_holder[CAND_ROW] == l_holder && (r_out[CAND_ROW] == FAILED \
    || ((r_out[CAND_ROW] == RUNNING || r_out[CAND_ROW] == ABANDONED) && l_exp < now)))

/* P2, checked in every state by a process of its own */
#ifndef P2_EXEMPT
#define P2_EXEMPT (beside[0] || beside[1])
#endif
#define OVERLAP (exec[0] && exec[1] && until[0] >= now && until[1] >= now)
/* a live run: its worker executes, under a lease the database granted until >= now */
#define LIVE(r, f, h) (exec[r] && lf[r] == (f) && ln[r] == (h) && until[r] >= now)

inline sweep(fence, nonce) {
    for (i : 0 .. ROWS - 1) {
        if
        :: r_out[i] == RUNNING && (r_fence[i] < fence || r_holder[i] != nonce) ->
            r_out[i] = ABANDONED
        :: else
        fi
    }
    i = 0
}

inline issue(fence) {
    /* property: P4_fences_increase */
    assert(SAFE_WITHOUT_LOSS(fence > issued));
    if :: fence > issued -> issued = fence :: else fi
}

/* The tick's acquisition, req_s/req_n of replica r: postgresql.acquire_statement
   (acquired, abandoned, recorded CTEs; base.take_if_free), one transaction on SQLite
   and MySQL/MariaDB. won: the new fence, else 0. */
inline db_acquire(r, won) {
    won = 0;
    /* guard: acquire insert: b.slot < 0 OR b.slot::float8 / 1000.0 <= now + b.tolerance */
    if
    :: req_m[r] ->
        if
        :: !l_exists ->     /* slot -1: below every slot */
            l_exists = 1; l_holder = req_n[r]; l_fence = 1; l_slot = 0; l_exp = now + TTL;
            won = 1
        /* guard: acquire manual conflict: l.expires_at < now AND NOT l.paused AND excluded.slot < 0 */
        /* guard: acquire manual slot: CASE WHEN excluded.slot < 0 THEN l.slot */
        :: l_exists && G_MANUAL_EXPIRED ->
            l_holder = req_n[r]; l_fence = l_fence + 1; l_exp = now + TTL;
            won = l_fence
        :: else
        fi
    :: !req_m[r] && req_s[r] * GAP <= now + TOL ->
        if
        :: !l_exists ->
            l_exists = 1; l_holder = req_n[r]; l_fence = 1; l_slot = req_s[r]; l_exp = now + TTL;
            won = 1
        /* guard: acquire conflict: l.expires_at < now AND NOT l.paused AND (excluded.slot < 0 OR l.slot < excluded.slot) */
        :: l_exists && G_EXPIRED && G_CURSOR(req_s[r]) ->
            l_holder = req_n[r]; l_fence = l_fence + 1; l_slot = req_s[r]; l_exp = now + TTL;
            won = l_fence
        :: else
        fi
    :: else
    fi;
    if
    :: won ->
        issue(won);
        /* guard: acquire abandoned: r.name = a.name AND r.outcome = 'running' AND (r.fence < a.fence OR r.holder <> a.holder) */
        sweep(won, req_n[r]);
        if
        :: req_m[r] ->
            r_out[MIX] = RUNNING; r_fence[MIX] = won; r_holder[MIX] = req_n[r];
            printf("@@ now=%d R%d acquire manual run (nonce %d): won, fence %d, expires %d\n",
                now, r, req_n[r], won, l_exp)
        :: else ->
            r_out[RIX(req_s[r], 1)] = RUNNING; r_fence[RIX(req_s[r], 1)] = won;
            r_holder[RIX(req_s[r], 1)] = req_n[r];
            printf("@@ now=%d R%d acquire slot %d (nonce %d): won, fence %d, expires %d\n",
                now, r, req_s[r], req_n[r], won, l_exp)
        fi
    :: else ->
        if
        :: req_m[r] ->
            printf("@@ now=%d R%d acquire manual run (nonce %d): refused (fence %d, expires %d)\n",
                now, r, req_n[r], l_fence, l_exp)
        :: !req_m[r] && req_s[r] * GAP > now + TOL ->
            printf("@@ now=%d R%d acquire slot %d (nonce %d): refused, future (due at %d)\n",
                now, r, req_s[r], req_n[r], req_s[r] * GAP)
        :: else ->
            printf("@@ now=%d R%d acquire slot %d (nonce %d): refused (cursor %d, fence %d, expires %d)\n",
                now, r, req_s[r], req_n[r], l_slot, l_fence, l_exp)
        fi
    fi
}

/* The worker starts executing the run of lease lf/ln/ls/la. */
inline start(r) {
    started[ROW(r)]++;
    own_started[r * ROWS + ROW(r)]++;
    printf("@@ now=%d R%d starts slot %d attempt %d, fence %d\n", now, r, ls[r], la[r], lf[r]);
    /* property: P1_one_start_per_slot_attempt */
    assert(SAFE_WITHOUT_LOSS(started[ROW(r)] <= 1));
#ifndef WAIVE_P1W
    /* property: P1w_one_start_per_replica */
    assert(own_started[r * ROWS + ROW(r)] <= 1);
#endif
#ifndef WAIVE_P4W
    /* property: P4w_own_fences_increase */
    assert(lf[r] > last_fence[r]);
#endif
    last_fence[r] = lf[r];
    BESIDE(r);
    if :: !lm[r] -> DECIDE(ls[r]) :: else fi;
    exec[r] = 1;
    ph[r] = RUN
}

inline forget_request(r) {
    req_s[r] = 0; req_n[r] = 0; req_a[r] = 0; req_f[r] = 0; req_m[r] = 0
}

/* lost_writes.check / LostWrites.reacquired: learn the slot and fence; a win whose fence
   is not above the one seen is refenced before the run starts */
inline won_lease(r, fence) {
    lf[r] = fence; ln[r] = req_n[r]; ls[r] = req_s[r]; la[r] = req_a[r]; until[r] = l_exp;
    lm[r] = req_m[r];
    WSEEN(r);
    forget_request(r);
    /* a manual win: the row's cursor not read (Watermarks.saw(slot None)) */
    if :: !lm[r] && ls[r] > seen_s[r] -> seen_s[r] = ls[r] :: else fi;
    if
#ifndef NO_GIVE_BACK
    /* LostWrites._renumber_or_give_up: while the lease seen may still be held, the win
       is given back; after that, renumbered */
    :: fence <= seen_f[r] && HELD(r) -> ph[r] = GIVEBACK
    :: fence <= seen_f[r] && !HELD(r) -> ph[r] = REFENCE
#else
    :: fence <= seen_f[r] -> ph[r] = REFENCE
#endif
    :: else -> seen_f[r] = fence; seen_h[r] = 0; SEEN_N(r, ln[r]); start(r)
    fi
}

/* lost_writes.check on a refusal: a row behind what was seen is written back
   (Statements.raise_floor: never lowering either), then learnt */
inline refused(r) {
    if :: !req_m[r] -> DECIDE(req_s[r]) :: else fi;
    /* the row as read, and its expiry if unexpired (a lease another attempt holds) */
    rf = l_fence;
#ifdef LOST_WRITES
    if :: l_exists && l_exp >= now -> rh = l_exp :: else fi;
#endif
    if
    :: l_exists && (l_slot < seen_s[r] || l_fence < seen_f[r]) ->
        /* guard: raise floor: leases.name = :b_name */
        if :: l_slot < seen_s[r] -> l_slot = seen_s[r] :: else fi;
        /* while the lease seen may still be held, only to just below its fence: its
           holder may write it back, over a lower fence only */
        if
        :: HELD(r) && l_fence < seen_f[r] - 1 -> l_fence = seen_f[r] - 1
        :: !HELD(r) && l_fence < seen_f[r] -> l_fence = seen_f[r]
        :: else
        fi;
        printf("@@ now=%d R%d writes back slot %d, fence %d\n", now, r, l_slot, l_fence)
    :: else
    fi;
    if :: l_exists && l_slot > seen_s[r] -> seen_s[r] = l_slot :: else fi;
    /* Watermarks.saw: a newer fence replaces what was known of the older lease */
    if
    :: l_exists && rf > seen_f[r] -> seen_f[r] = rf; seen_h[r] = rh; SEEN_N(r, l_holder)
    :: l_exists && rf == seen_f[r] && rh > seen_h[r] -> seen_h[r] = rh
    :: else
    fi;
    rf = 0; rh = 0;
    forget_request(r);
    ph[r] = IDLE
}

inline answered(r, won) {
    if
    :: won -> won_lease(r, won)
    :: else -> refused(r)
    fi
}

proctype replica(byte r) {
    byte won, out, i, rf, rh;
end:
    do
    /* --- the acquirer: the timer of its next slot fires, early by up to the clock error */
    :: atomic {
        ph[r] == IDLE && next_s[r] <= NS && now + CLOCK_ERR >= next_s[r] * GAP ->
        req_s[r] = next_s[r]; next_s[r]++;
        if
        :: req_s[r] <= seen_s[r] ->     /* lost_writes.refusals: it saw this slot taken */
            printf("@@ now=%d R%d refuses slot %d: it saw it taken\n", now, r, req_s[r]);
            DECIDE(req_s[r]);
            forget_request(r)
        :: else ->
            nonces++; req_n[r] = nonces; req_a[r] = 1;
            if
            :: db_acquire(r, won); answered(r, won)
            :: db_acquire(r, won); ph[r] = UNKNOWN;
               printf("@@ now=%d R%d: the connection broke after the statement ran\n", now, r)
            :: ph[r] = UNKNOWN;
               printf("@@ now=%d R%d acquire slot %d (nonce %d): the connection broke before it ran\n",
                   now, r, req_s[r], req_n[r])
            fi
        fi;
        won = 0
       }
#ifdef RUN_NOW
    /* --- run_now: a manual acquisition (slot -1): no future gate, no cursor, the row's
       cursor kept; lost_writes.refusals does not refuse it */
    :: atomic {
        ph[r] == IDLE && manuals < 1 ->
        manuals++;
        nonces++; req_n[r] = nonces; req_a[r] = 1; req_m[r] = 1;
        if
        :: db_acquire(r, won); answered(r, won)
        :: db_acquire(r, won); ph[r] = UNKNOWN;
           printf("@@ now=%d R%d: the connection broke after the statement ran\n", now, r)
        :: ph[r] = UNKNOWN;
           printf("@@ now=%d R%d acquire manual run (nonce %d): the connection broke before it ran\n",
               now, r, req_n[r])
        fi;
        won = 0
       }
#endif
    /* --- recovery.recover: the nonce check, then the same request once more */
    :: atomic {
        ph[r] == UNKNOWN ->
        /* guard: recover: row.holder == nonce AND (request.manual or row.slot == request.slot) */
        if
        :: l_exists && (req_m[r] || l_slot == req_s[r]) && G_NONCE(req_n[r]) ->
            printf("@@ now=%d R%d recovers: the row carries slot %d (holder %d): won, fence %d\n",
                now, r, l_slot, l_holder, l_fence);
            won_lease(r, l_fence)
#ifdef NO_GIVE_UP
        :: else -> skip     /* waits for its row: a request whose statement never ran waits forever */
#else
        :: else ->
            if
            :: printf("@@ now=%d R%d recovers: not its row; sends again\n", now, r);
               db_acquire(r, won); answered(r, won)
            :: printf("@@ now=%d R%d recovers: the second round failed too\n", now, r);
               if :: !req_m[r] -> DECIDE(req_s[r]) :: else fi;
               forget_request(r); ph[r] = IDLE
            fi
#endif
        fi;
        won = 0
       }
    /* --- LostWrites._refence: Statements.refence, the lease and its run rows */
    :: atomic {
        ph[r] == REFENCE ->
        /* guard: refence: leases.name = :b_name AND leases.holder = :b_holder */
        if
        :: G_REFENCE(r) ->
            /* above what it saw and what the row has: another replica's write-back may
               have raised the fence since the win */
            if :: l_fence < seen_f[r] + 1 -> l_fence = seen_f[r] + 1 :: else -> l_fence = l_fence + 1 fi;
            if :: l_slot < seen_s[r] -> l_slot = seen_s[r] :: else fi;
            for (i : 0 .. ROWS - 1) {
                if
                :: r_fence[i] == lf[r] && r_holder[i] == ln[r] -> r_fence[i] = l_fence
                :: else
                fi
            }
            i = 0;
            printf("@@ now=%d R%d refences fence %d as %d\n", now, r, lf[r], l_fence);
            lf[r] = l_fence;
            issue(l_fence)
        :: else
        fi;
        if
#ifdef REFENCE_FENCE_MATCH
        :: 1 ->     /* as before 10.4's fix: kept, and run, whatever the row */
#else
        :: lf[r] == l_fence && ln[r] == l_holder ->
#endif
            if :: lf[r] > seen_f[r] -> seen_f[r] = lf[r]; seen_h[r] = 0; SEEN_N(r, ln[r]) :: else fi;
            start(r)
        :: else ->
            /* LostWrites._taken_meanwhile: taken over (a holder wrote its lease back over
               it): not run, its run row recorded as such (Statements.give_back's run part) */
            i = ROW(r);
            if
            :: r_fence[i] == lf[r] && r_holder[i] == ln[r] && r_out[i] == RUNNING -> r_out[i] = MISSED
            :: else
            fi;
            printf("@@ now=%d R%d cannot refence fence %d: taken over; slot %d not run\n", now, r, lf[r], ls[r]);
            if :: !lm[r] -> DECIDE(ls[r]) :: else fi;
            until[r] = 0; ph[r] = IDLE; UNBLIND(r);
            lf[r] = 0; ln[r] = 0; ls[r] = 0; la[r] = 0; lm[r] = 0; i = 0
        fi
       }
    /* --- LostWrites._renumber_or_give_up: Statements.give_back, the win undone and its
       slot given up (its run row 'missed'), one transaction */
    :: atomic {
        ph[r] == GIVEBACK ->
        i = ROW(r);
        /* guard: give up run: runs.name = :b_name AND runs.slot = :b_run_slot AND runs.manual = :b_manual AND runs.fence = :b_fence AND runs.holder = :b_holder AND runs.outcome = 'running' */
        if
        :: r_fence[i] == lf[r] && r_holder[i] == ln[r] && r_out[i] == RUNNING -> r_out[i] = MISSED
        :: else
        fi;
        /* guard: give back: leases.name = :b_name AND leases.holder = :b_holder */
        if
        :: l_exists && l_holder == ln[r] ->
            /* the win's own increment undone, unless a write-back raised the fence since */
            if :: l_fence == lf[r] -> l_fence = l_fence - 1 :: else fi;
            l_exp = now - 1;
            printf("@@ now=%d R%d gives back fence %d (the lease of fence %d seen held until %d): slot %d not run, fence now %d\n",
                now, r, lf[r], seen_f[r], seen_h[r], ls[r], l_fence)
        :: else ->
            printf("@@ now=%d R%d gives up fence %d: taken over meanwhile; slot %d not run\n", now, r, lf[r], ls[r])
        fi;
        if :: !lm[r] -> DECIDE(ls[r]) :: else fi;
        until[r] = 0; ph[r] = IDLE; UNBLIND(r);
        lf[r] = 0; ln[r] = 0; ls[r] = 0; la[r] = 0; lm[r] = 0; i = 0
       }
    /* --- the heartbeat thread: postgresql.heartbeat_statement */
    :: atomic {
        ph[r] == RUN && HB_DUE(r) ->
        LAPSED(r);
        /* guard: heartbeat: l.name = b.name AND l.fence = b.fence AND l.holder = b.holder */
        if
        :: l_exists && G_HB(r) ->
            printf("@@ now=%d R%d renews fence %d: expires %d\n", now, r, lf[r], now + TTL);
            /* property: P3_stale_holder_cannot_write */
            assert(l_holder == ln[r]);
            l_exp = now + TTL;
            until[r] = l_exp;
            RENEWED(r)
        /* LeaseStore.heartbeat_many: a renewal refused is followed by Statements.reassert
           (in the code its own transaction right after; here the same step: its own
           guard decides on the row as it is) */
        /* guard: reassert: leases.name = :b_name AND leases.fence < :b_fence */
        :: !(l_exists && G_HB(r)) && l_exists && G_REASSERT(r) ->
            /* property: P3_stale_holder_cannot_write */
            assert(l_fence < lf[r]);
            printf("@@ now=%d R%d renewal refused; writes its lease back over fence %d (holder %d): fence %d, expires %d\n",
                now, r, l_fence, l_holder, lf[r], now + TTL);
            l_fence = lf[r]; l_holder = ln[r]; l_exp = now + TTL; until[r] = l_exp;
            if :: !lm[r] && l_slot < ls[r] -> l_slot = ls[r] :: else fi;
            i = ROW(r);
            /* guard: revive run: runs.name = :b_name AND runs.slot = :b_run_slot AND runs.manual = :b_manual AND runs.fence = :b_fence AND runs.holder = :b_holder AND runs.outcome = 'abandoned' */
            if
            :: r_fence[i] == lf[r] && r_holder[i] == ln[r] && r_out[i] == ABANDONED -> r_out[i] = RUNNING
            :: else
            fi;
            i = 0
        :: else ->
            printf("@@ now=%d R%d renewal refused: the lease is not its own\n", now, r);
            GONE(r);
            HB_LOST(r)
        fi
       }
    /* --- the worker ends: postgresql.finish_statement (finished, released CTEs) */
    :: atomic {
        ph[r] == RUN ->
        if :: out = DONE :: out = FAILED fi;
        i = ROW(r);
        /* guard: finish run: r.name = b.name AND r.slot = b.slot AND r.manual = b.manual AND r.fence = b.fence AND r.holder = b.holder AND r.outcome IN ('running', 'abandoned') */
        if
        :: r_fence[i] == lf[r] && G_HOLDER(r_holder[i], r) && (r_out[i] == RUNNING || r_out[i] == ABANDONED) ->
            /* property: P3_stale_holder_cannot_write */
            assert(r_holder[i] == ln[r]);
            if :: r_out[i] == ABANDONED -> r_out[i] = LOST :: else -> r_out[i] = out fi
        :: else
        fi;
        /* guard: finish release: b.release AND l.name = b.name AND l.fence = b.fence AND l.holder = b.holder */
        if
        :: l_exists && l_fence == lf[r] && G_HOLDER(l_holder, r) ->
            /* property: P3_stale_holder_cannot_write */
            assert(l_holder == ln[r]);
            l_exp = now - 1
        :: else
        fi;
        printf("@@ now=%d R%d finishes slot %d attempt %d (fence %d): run row %d\n",
            now, r, ls[r], la[r], lf[r], r_out[i]);
        exec[r] = 0; until[r] = 0; ph[r] = IDLE; HB_RESET(r); UNBLIND(r);
        lf[r] = 0; ln[r] = 0; ls[r] = 0; la[r] = 0; lm[r] = 0; i = 0; out = 0
       }
#ifndef NO_ATTEMPTS
    /* --- the attempt poll: AttemptStatements._candidates; attempt_refusals */
    :: atomic {
        ph[r] == IDLE && CANDIDATE && l_slot >= seen_s[r] && l_fence >= seen_f[r] ->
        /* guard: candidates: runs.slot = leases.slot AND runs.manual = false AND runs.fence = leases.fence AND runs.holder = leases.holder */
        /* guard: candidates outcome: runs.outcome IN ('failed', 'timed_out') OR runs.outcome IN ('running', 'abandoned') AND leases.expires_at < now */
        req_s[r] = l_slot; req_f[r] = l_fence; req_a[r] = 2;
        ph[r] = CAND;
        printf("@@ now=%d R%d: slot %d attempt 1 (fence %d) is a candidate\n", now, r, l_slot, l_fence)
       }
    /* --- AttemptStatements.reacquire: compare-and-swap, sweep, run row, one transaction */
    :: atomic {
        ph[r] == CAND ->
        nonces++; req_n[r] = nonces;
        /* guard: reacquire: leases.name = :b_name AND leases.fence = :b_fence AND leases.slot = :b_slot AND NOT leases.paused AND leases.expires_at < now */
        if
        :: l_exists && l_fence == req_f[r] && l_slot == req_s[r] && G_CAS_EXPIRED ->
            l_holder = req_n[r]; l_fence = l_fence + 1; l_exp = now + TTL; won = l_fence;
            issue(won);
            /* guard: abandon others: runs.name = :b_name AND runs.outcome = 'running' AND (runs.fence < :b_fence OR runs.holder != :b_holder) */
            sweep(won, req_n[r]);
            r_out[RIX(req_s[r], 2)] = RUNNING; r_fence[RIX(req_s[r], 2)] = won;
            r_holder[RIX(req_s[r], 2)] = req_n[r];
            printf("@@ now=%d R%d reacquires slot %d for attempt 2: won, fence %d\n", now, r, req_s[r], won)
        :: else ->
            printf("@@ now=%d R%d reacquires slot %d for attempt 2: refused\n", now, r, req_s[r])
        fi;
        answered(r, won);
        won = 0
       }
#endif
    /* --- the replica crashes and restarts: its threads and its memory are gone */
    :: atomic {
        crashes < MAXCRASH && CAN_CRASH(r) ->
        crashes++;
        printf("@@ now=%d R%d crashes and restarts\n", now, r);
#ifdef WATCH
        /* its running run rows are dead: stuck once the lease expires, or at once if the
           lease is another attempt's */
        for (i : 0 .. ROWS - 1) {
            if
            :: r_out[i] == RUNNING && r_holder[i] != 0 && (r_holder[i] == ln[r] || r_holder[i] == req_n[r]) ->
                if
                :: r_fence[i] == l_fence && r_holder[i] == l_holder && l_exp >= now ->
                    dead_from[i] = l_exp + 1
                :: else -> dead_from[i] = now + 1
                fi
            :: else
            fi
        }
#endif
        exec[r] = 0; until[r] = 0; ph[r] = IDLE; HB_RESET(r); UNBLIND(r);
        lf[r] = 0; ln[r] = 0; ls[r] = 0; la[r] = 0; lm[r] = 0;
        forget_request(r);
        seen_s[r] = 0; seen_f[r] = 0; seen_h[r] = 0; SEEN_N(r, 0); last_fence[r] = 0;
        for (i : 0 .. ROWS - 1) { own_started[r * ROWS + i] = 0 }
        i = 0
       }
    od
}

/* the database clock, the stuck watcher (fleet-wide: whichever replica runs it),
   and with LOST_WRITES replication to the standby and one failover to it */
active proctype database() {
    byte i;
end:
    do
#ifdef WATCH
    /* the clock passes a tick only if the watcher passed within the last WATCH ticks */
    :: atomic {
        now < MAXT && now + 1 - watched <= WATCH ->
        for (i : 0 .. ROWS - 1) {
            /* property: P6_watcher_marks_dead_runs_in_bound */
            assert(!(r_out[i] == RUNNING && dead_from[i] && now + 1 >= dead_from[i] + WATCH))
        }
        i = 0;
        now++
       }
#else
    :: d_step { now < MAXT -> now++ }
#endif
#ifndef NO_ATTEMPTS
    /* AttemptStatements._stuck and _mark_stuck, one transaction */
    :: atomic {
#ifdef WATCH
        watched < now -> watched = now;     /* one pass per tick */
#endif
        /* guard: stuck: runs.fence != leases.fence OR runs.holder != leases.holder OR leases.expires_at < now */
        for (i : 0 .. ROWS - 1) {
            if
            :: r_out[i] == RUNNING && (r_fence[i] != l_fence || r_holder[i] != l_holder || G_STUCK_EXPIRED) ->
                printf("@@ now=%d the watcher marks the run of fence %d abandoned\n", now, r_fence[i]);
                /* property: P5_watcher_spares_live_runs */
                assert(SAFE_WITHOUT_LOSS(!LIVE(0, r_fence[i], r_holder[i]) && !LIVE(1, r_fence[i], r_holder[i])));
                r_out[i] = ABANDONED
            :: else
            fi
        }
        i = 0
       }
#endif
#ifdef LOST_WRITES
    :: d_step {
        !failed_over ->
        s_exists = l_exists; s_holder = l_holder; s_fence = l_fence; s_slot = l_slot; s_exp = l_exp;
        for (i : 0 .. ROWS - 1) { s_out[i] = r_out[i]; s_rfence[i] = r_fence[i]; s_rholder[i] = r_holder[i] }
        i = 0
       }
    :: d_step {
        !failed_over ->
        failed_over = 1;
        printf("@@ now=%d failover: the standby had slot %d, fence %d, holder %d; later commits are lost\n",
            now, s_slot, s_fence, s_holder);
        SHORTEN(0); SHORTEN(1);
        l_exists = s_exists; l_holder = s_holder; l_fence = s_fence; l_slot = s_slot; l_exp = s_exp;
        for (i : 0 .. ROWS - 1) { r_out[i] = s_out[i]; r_fence[i] = s_rfence[i]; r_holder[i] = s_rholder[i] }
        s_exists = 0; s_holder = 0; s_fence = 0; s_slot = 0; s_exp = 0;
        for (i : 0 .. ROWS - 1) { s_out[i] = 0; s_rfence[i] = 0; s_rholder[i] = 0 }
        i = 0
       }
#endif
    od
}

/* P2: no two runs execute while both hold an unexpired lease */
active proctype overlap() {
#ifdef P2_LOST
    /* property: P2_no_overlap_while_both_unexpired */
    assert(!(OVERLAP && !gone[0] && !gone[1]) || P2_EXEMPT)
#else
    /* property: P2_no_overlap_while_both_unexpired */
    assert(SAFE_WITHOUT_LOSS(!OVERLAP))
#endif
}

#ifdef LIVENESS
/* L1: with weak fairness, every due tick is run or skipped with a reason by R0, the
   replica that stays up (refused by the database or by what it saw, or its acquisition
   failed twice), whatever R1 does (it may crash once, holding the lease) */
ltl L1_every_due_tick_decided { <> (decided == ALL_SLOTS) }
#endif

init {
    atomic {
        next_s[0] = 1; next_s[1] = 1;
        run replica(0);
        run replica(1)
    }
}
