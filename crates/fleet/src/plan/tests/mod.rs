//! The plan on made-up times: each test is a sequence of steps with the
//! time, the local bucket and Redis's answers given by hand.

use super::*;
use shape_leaves::counting::Counting;

const RATE: u64 = 8 << 20;
const BURST: u64 = RATE / 10;

fn held(generation: u64) -> Held {
    Held {
        limit: Limit::per_second(RATE),
        burst: BURST,
        paused: false,
        counting: Counting::Bytes,
        generation,
        follows: true,
    }
}

fn idle(granted: u64) -> Local {
    Local {
        granted,
        in_hand: 0,
        waiting: false,
    }
}

fn answer(granted: u64, lead_ms: i64, part: u64) -> Event {
    Event::Answered(LeaseReply {
        granted,
        lead: lead_ms * MS as i64,
        held: held(1),
        members: 4,
        slope: part,
        part,
        lease_time: std::time::Duration::from_nanos(LEASE_TIME),
    })
}

/// A plan that has asked at 0 and heard, 10 ms later, a lease of `granted`
/// tokens whose first tokens are spendable `lead_ms` from Redis's now.
fn leased(fallback: Fallback, granted: u64, lead_ms: i64) -> (Leases, Step) {
    let mut plan = Leases::new(held(1), fallback, 0, 0);
    let first = plan.step(0, idle(0), Event::Tick);
    assert!(first.ask.is_some());
    let step = plan.step(10 * MS, idle(0), answer(granted, lead_ms, RATE / 4));
    (plan, step)
}

#[test]
fn a_new_member_asks_at_once_for_as_much_as_it_can_get_and_waits_for_it() {
    let mut plan = Leases::new(held(3), Fallback::Last, 0, 0);
    let step = plan.step(0, idle(0), Event::Tick);
    let ask = step.ask.unwrap();
    assert_eq!(ask.demand, INSATIABLE);
    // A tenth of a second of an even split among the members heard of (1).
    assert_eq!(ask.want, RATE / 10);
    assert_eq!(ask.settings, held(3));
    assert!(step.set.unwrap().paused, "nothing to spend before a lease");
    // One call at a time.
    assert_eq!(plan.step(MS, idle(0), Event::Tick).ask, None);
}

#[test]
fn a_lease_in_the_share_burst_is_spendable_at_once_at_the_members_part() {
    // Lead -100 ms: the share's burst is unused, all of the lease may go.
    let (_, step) = leased(Fallback::Last, 200_000, -100);
    let set = step.set.unwrap();
    assert!(!set.paused);
    // A little above its part, to catch up after a hiccup: its leases
    // alone bound what it spends.
    let local = RATE as f64 / 4.0 * HEADROOM;
    assert_eq!(
        set.limit,
        Limit::Rate(Rate::from_bytes_per_sec(local).unwrap())
    );
    // Spending at that rate, it wants its next lease when what it holds
    // lasts a likely round trip (15 ms after one of 10 ms), a margin of
    // 20 ms and half a lease time: 5.8 ms from now, and it wakes then,
    // long before its 200,000 tokens run out (90.8 ms).
    let surplus = 200_000.0 - local * 0.085;
    assert_eq!(
        step.wake,
        10 * MS + (surplus / local * SECOND as f64) as u64
    );
}

#[test]
fn a_lease_later_on_the_timeline_is_spent_from_its_start_on() {
    // Asked at 0, answered at 10 ms: Redis's now is 5 ms, the lease's first
    // tokens are 45 ms after that.
    let (mut plan, step) = leased(Fallback::Last, 200_000, 45);
    assert!(step.set.unwrap().paused);
    // Resumes once 5 ms at its bucket's rate are spendable: 11,010 tokens
    // at its part (the lease's slope) after 50 ms.
    let resume = 50 * MS + (11_010.0 / (RATE / 4) as f64 * SECOND as f64).ceil() as u64;
    assert_eq!(step.wake, resume);
    let step = plan.step(resume, idle(0), Event::Tick);
    assert!(!step.set.unwrap().paused);
}

#[test]
fn while_redis_hangs_a_member_spends_only_what_it_holds() {
    let (mut plan, _) = leased(Fallback::Block, 200_000, -100);
    // It spent 180,000 tokens; the next lease is asked for, and Redis
    // does not answer.
    let asked = plan.step(60 * MS, idle(180_000), Event::Tick);
    assert!(asked.ask.is_some());
    let step = plan.step(70 * MS, idle(200_000), Event::Tick);
    assert!(step.set.unwrap().paused, "all it held is spent");
    assert_eq!(step.ask, None, "the call is still in flight");
    // The call times out: block holds, and says so once.
    let failed = plan.step(
        1070 * MS,
        idle(200_000),
        Event::Failed(RedisFailure::Unreachable("no answer within 1 s".into())),
    );
    assert_eq!(
        failed.say.as_deref(),
        Some("Redis is unreachable (no answer within 1 s); holding the data until it is back")
    );
    assert_eq!(failed.set, None, "still paused");
}

#[test]
fn each_fallback_does_what_it_says_when_a_call_fails() {
    let unreachable = || Event::Failed(RedisFailure::Unreachable("Connection refused".into()));
    let (mut last, _) = leased(Fallback::Last, 200_000, -100);
    let _ = last.step(60 * MS, idle(180_000), Event::Tick);
    let step = last.step(70 * MS, idle(190_000), unreachable());
    assert_eq!(
        step.say.as_deref(),
        Some(
            "Redis is unreachable (Connection refused); going on at 2.00 MiB/s, the last known rate per shape"
        )
    );
    let set = step
        .set
        .unwrap_or(Setting::new(Limit::per_second(RATE / 4), BURST, false));
    assert_eq!(
        (set.limit, set.paused),
        (Limit::per_second(RATE / 4), false)
    );

    let (mut open, _) = leased(Fallback::Open, 200_000, -100);
    let _ = open.step(60 * MS, idle(180_000), Event::Tick);
    let step = open.step(70 * MS, idle(190_000), unreachable());
    assert_eq!(step.set.unwrap().limit, Limit::Unlimited);
    assert!(
        step.say
            .unwrap()
            .ends_with("going on without a limit until it is back")
    );
}

#[test]
fn a_failure_is_said_once_per_cause_and_retried_with_a_growing_pause() {
    let (mut plan, _) = leased(Fallback::Last, 200_000, -100);
    let _ = plan.step(60 * MS, idle(180_000), Event::Tick);
    let mut now = 70 * MS;
    let mut retries = Vec::new();
    for round in 0..6 {
        let failure = RedisFailure::Refused("NOPERM".into());
        let step = plan.step(now, idle(190_000), Event::Failed(failure));
        assert_eq!(
            step.say.is_some(),
            round == 0,
            "round {round}: {:?}",
            step.say
        );
        retries.push((step.wake - now) / MS);
        now = step.wake;
        let retry = plan.step(now, idle(190_000), Event::Tick);
        assert!(retry.ask.is_some(), "round {round}");
    }
    assert_eq!(retries, [25, 50, 100, 200, 250, 250]);
    // Another cause is said; healing is said.
    let step = plan.step(
        now,
        idle(190_000),
        Event::Failed(RedisFailure::Unreachable("reset".into())),
    );
    assert!(
        step.say
            .unwrap()
            .starts_with("Redis is unreachable (reset)")
    );
    let _ = plan.step(step.wake, idle(190_000), Event::Tick);
    let back = plan.step(
        step.wake + MS,
        idle(190_000),
        answer(100_000, -100, RATE / 4),
    );
    assert_eq!(back.say.as_deref(), Some("Redis is back"));
}

#[test]
fn settings_heard_are_what_a_member_would_start_the_share_again_with() {
    let (mut plan, _) = leased(Fallback::Last, 200_000, -100);
    let mut changed = held(7);
    changed.limit = Limit::per_second(RATE * 2);
    let _ = plan.step(60 * MS, idle(180_000), Event::Tick);
    let step = plan.step(
        70 * MS,
        idle(180_000),
        Event::Answered(LeaseReply {
            granted: 0,
            lead: 0,
            held: changed,
            members: 4,
            slope: RATE / 2,
            part: RATE / 2,
            lease_time: std::time::Duration::from_nanos(LEASE_TIME),
        }),
    );
    let local = (RATE / 2) as f64 * HEADROOM;
    assert_eq!(
        step.set.unwrap().limit,
        Limit::Rate(Rate::from_bytes_per_sec(local).unwrap())
    );
    // Nothing granted: asked again a little later, with what it heard.
    assert_eq!(step.ask, None);
    let ask = plan.step(95 * MS, idle(180_000), Event::Tick).ask.unwrap();
    assert_eq!(ask.settings, changed);
}

#[test]
fn leases_grow_with_the_round_trip_and_are_asked_for_one_round_trip_ahead() {
    let mut plan = Leases::new(held(1), Fallback::Last, 0, 0);
    let _ = plan.step(0, idle(0), Event::Tick);
    // 200 ms to Redis and back.
    let part = RATE / 4;
    let ask = plan
        .step(200 * MS, idle(0), answer(100_000, -100, part))
        .ask
        .unwrap();
    // Twice the likely round trip (200 ms and twice a quarter of it) at
    // the member's part.
    assert_eq!(ask.want, (part as f64 * 0.6) as u64);
}

#[test]
fn what_a_spending_member_let_lapse_past_the_share_burst_is_lost() {
    // Two seconds at its part, spendable from 100 ms ago.
    let (mut plan, _) = leased(Fallback::Last, RATE / 2, -100);
    let spending = Local {
        granted: 1000,
        in_hand: 0,
        waiting: true,
    };
    let _ = plan.step(3 * SECOND, spending, Event::Tick);
    // What it may still spend is the share's burst in time (100 ms) and
    // its bucket's own (20 ms), at its bucket's rate; the rest lapsed.
    let most = RATE as f64 / 4.0 * HEADROOM * 0.12;
    let unused = plan.unused(1000) as f64;
    assert!((unused - most).abs() < 2.0, "{unused} of {most}");
}

#[test]
fn what_is_unused_is_what_was_leased_less_what_was_spent() {
    let (mut plan, _) = leased(Fallback::Last, 200_000, 400);
    assert_eq!(plan.unused(50_000), 150_000);
    let _ = plan.step(20 * MS, idle(50_000), Event::Tick);
    assert_eq!(plan.unused(250_000), 0);
}

#[test]
fn an_idle_member_asks_only_for_the_settings_and_claims_little_of_the_rate() {
    let (mut plan, _) = leased(Fallback::Last, 200_000, -100);
    // In its first second its pace is not known: it claims all it can get.
    let poll = plan
        .step(10 * MS + LEASE_TIME, idle(0), Event::Tick)
        .ask
        .unwrap();
    assert_eq!((poll.want, poll.demand), (0, INSATIABLE));
    let _ = plan.step(20 * MS + LEASE_TIME, idle(0), answer(0, 0, RATE / 4));
    let poll = plan
        .step(WARM_UP + 20 * MS, idle(0), Event::Tick)
        .ask
        .unwrap();
    assert_eq!(poll.want, 0);
    assert_eq!(
        poll.demand,
        RATE / 100,
        "a hundredth of the share, its least"
    );
}

#[test]
fn a_member_held_back_by_its_bucket_asks_for_as_much_as_it_can_get() {
    let (mut plan, _) = leased(Fallback::Last, 200_000, -100);
    let waiting = Local {
        granted: 50_000,
        in_hand: 0,
        waiting: true,
    };
    let ask = plan.step(30 * MS, waiting, Event::Tick).ask.unwrap();
    assert_eq!(ask.demand, INSATIABLE);
    // Then spending as it pleases, below its bucket's rate: it asks for
    // its pace and a quarter more.
    let answered = plan.step(40 * MS, idle(60_000), answer(200_000, -100, RATE / 4));
    assert_eq!(answered.ask, None);
    // (Once its first second is over: until then it counts as wanting
    // all it can get.)
    let ask = plan
        .step(WARM_UP + 140 * MS, idle(260_000), Event::Tick)
        .ask
        .unwrap();
    assert!(ask.want > 0);
    assert_eq!(ask.demand, (210_000.0 / 1.11 * 1.25) as u64);
}

/// Redis's answer on a share of many members: a lease of `granted` tokens
/// at `slope`, of a fair `part`, on a share whose leases last `lease_ms`.
fn on_a_large_share(granted: u64, slope: u64, part: u64, lease_ms: u64) -> Event {
    Event::Answered(LeaseReply {
        granted,
        lead: -100 * MS as i64,
        held: held(1),
        members: 1000,
        slope,
        part,
        lease_time: std::time::Duration::from_millis(lease_ms),
    })
}

#[test]
fn leases_last_as_long_as_redis_says_and_an_idle_member_asks_that_seldom() {
    let part = RATE / 100;
    let mut plan = Leases::new(held(1), Fallback::Last, 0, 0);
    let _ = plan.step(0, idle(0), Event::Tick);
    let answered = plan.step(MS, idle(0), on_a_large_share(part * 5, part, part, 5000));
    assert_eq!(answered.ask, None, "five seconds at its part in hand");
    // Idle, it asks for the settings once a lease time, not ten times a
    // second.
    for at in [100 * MS, SECOND, 4 * SECOND] {
        assert_eq!(plan.step(at, idle(0), Event::Tick).ask, None, "at {at}");
    }
    let poll = plan
        .step(MS + 5 * SECOND, idle(0), Event::Tick)
        .ask
        .unwrap();
    assert_eq!((poll.want, poll.lasting.as_secs()), (0, 5));
    // Having spent four seconds' worth, it asks for five more seconds at
    // its part.
    let _ = plan.step(6 * SECOND, idle(0), on_a_large_share(0, part, part, 5000));
    let ask = plan
        .step(6 * SECOND + MS, idle(part * 4), Event::Tick)
        .ask
        .unwrap();
    assert_eq!(ask.want, part * 5);
}

#[test]
fn a_member_given_less_than_its_part_asks_again_a_tenth_of_a_lease_later() {
    let part = RATE / 1000;
    let mut plan = Leases::new(held(1), Fallback::Last, 0, 0);
    let _ = plan.step(0, idle(0), Event::Tick);
    // No room for its part yet: a short stretch at a tenth of it.
    let short = part / 10;
    let _ = plan.step(MS, idle(0), on_a_large_share(short / 5, short, part, 2000));
    assert_eq!(plan.step(100 * MS, idle(short / 5), Event::Tick).ask, None);
    let ask = plan.step(MS + 200 * MS, idle(short / 5), Event::Tick).ask;
    assert!(ask.is_some_and(|ask| ask.want > 0), "{ask:?}");
}

/// A member that joined when the others' stretches left it no room:
/// paused, with nothing to spend, it must still wake to ask again. It
/// slept until its poll for the settings instead (two round trips: 0.8 s
/// of nothing at 200 ms from Redis).
#[test]
fn a_member_given_nothing_for_want_of_room_wakes_to_ask_again_soon() {
    let mut plan = Leases::new(held(1), Fallback::Block, 0, 0);
    let _ = plan.step(0, idle(0), Event::Tick);
    let refused = plan.step(200 * MS, idle(0), answer(0, 0, RATE / 4));
    assert!(refused.set.unwrap().paused);
    assert_eq!(refused.ask, None, "not at once");
    // A tenth of a lease later, at the least 25 ms.
    let again = 200 * MS + FIRST_BACKOFF;
    assert_eq!(refused.wake, again);
    let ask = plan.step(again, idle(0), Event::Tick).ask;
    assert!(ask.is_some_and(|ask| ask.want > 0), "{ask:?}");
}

mod fleet;
