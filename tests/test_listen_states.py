"""The LISTEN connection's states (db/listen_states.py): every move of the diagram in
docs/worker.rst, and every move it has no arrow for. No database."""

import pytest

from django_dbjobs.db.listen_states import FIRST_PAUSE, LONGEST_PAUSE, IllegalMove, ListenStates, State


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def states_in(state: State, clock: Clock | None = None) -> ListenStates:
    """A ListenStates in `state`, reached by legal moves; a PAUSED one with its pause over."""
    clock = clock or Clock()
    states = ListenStates(clock)
    if state is State.LISTENING:
        states.opened(own_session=False)
    elif state is State.CLAIMING:
        states.opened(own_session=True)
    elif state is State.PAUSED:
        states.open_failed()
        clock.now += FIRST_PAUSE
    assert states.state is state
    return states


MOVES = {
    "opened, own session": lambda s: s.opened(own_session=True),
    "opened, shared session": lambda s: s.opened(own_session=False),
    "open_failed": lambda s: s.open_failed(),
    "lost": lambda s: s.lost(),
    "claim_broke": lambda s: s.claim_broke(),
    "closed": lambda s: s.closed(),
}

# (state, move) -> the state it leads to, or None: no arrow (IllegalMove).
DIAGRAM = {
    (State.CLOSED, "opened, own session"): State.CLAIMING,
    (State.CLOSED, "opened, shared session"): State.LISTENING,
    (State.CLOSED, "open_failed"): State.PAUSED,
    (State.CLOSED, "lost"): None,
    (State.CLOSED, "claim_broke"): None,
    (State.CLOSED, "closed"): State.CLOSED,
    (State.LISTENING, "opened, own session"): None,
    (State.LISTENING, "opened, shared session"): None,
    (State.LISTENING, "open_failed"): None,
    (State.LISTENING, "lost"): State.PAUSED,
    (State.LISTENING, "claim_broke"): None,  # no claim runs there
    (State.LISTENING, "closed"): State.CLOSED,
    (State.CLAIMING, "opened, own session"): None,
    (State.CLAIMING, "opened, shared session"): None,
    (State.CLAIMING, "open_failed"): None,
    (State.CLAIMING, "lost"): State.PAUSED,
    (State.CLAIMING, "claim_broke"): State.PAUSED,
    (State.CLAIMING, "closed"): State.CLOSED,
    (State.PAUSED, "opened, own session"): State.CLAIMING,  # its pause over
    (State.PAUSED, "opened, shared session"): State.LISTENING,
    (State.PAUSED, "open_failed"): State.PAUSED,
    (State.PAUSED, "lost"): None,
    (State.PAUSED, "claim_broke"): None,
    (State.PAUSED, "closed"): State.CLOSED,
}


def test_the_table_names_every_state_and_move():
    assert set(DIAGRAM) == {(state, move) for state in State for move in MOVES}


@pytest.mark.parametrize(("state", "move"), sorted(DIAGRAM, key=lambda key: (key[0].value, key[1])))
def test_each_move_leads_where_the_diagram_says_or_is_refused(state, move):
    states = states_in(state)
    expected = DIAGRAM[state, move]
    if expected is None:
        with pytest.raises(IllegalMove, match=f"while {state.value}"):
            MOVES[move](states)
        assert states.state is state, "a refused move changes nothing"
    else:
        MOVES[move](states)
        assert states.state is expected


@pytest.mark.parametrize("move", ["opened, own session", "opened, shared session", "open_failed"])
def test_a_paused_connection_is_not_opened_before_its_pause_is_over(move):
    clock = Clock()
    states = ListenStates(clock)
    assert states.open_failed() == FIRST_PAUSE
    assert not states.may_open() and states.retry_in() == FIRST_PAUSE
    clock.now += FIRST_PAUSE - 0.01
    with pytest.raises(IllegalMove):
        MOVES[move](states)
    clock.now += 0.01
    assert states.may_open() and states.retry_in() == 0
    MOVES[move](states)


def test_claims_run_on_it_only_while_claiming():
    seen = {state: (states_in(state).listening, states_in(state).claims_here) for state in State}
    assert seen == {
        State.CLOSED: (False, False),
        State.LISTENING: (True, False),
        State.CLAIMING: (True, True),
        State.PAUSED: (False, False),
    }


def test_the_pause_doubles_up_to_thirty_seconds_and_starts_again_once_open():
    clock = Clock()
    states = ListenStates(clock)
    pauses = []
    for _ in range(8):
        pauses.append(states.open_failed())
        clock.now += pauses[-1]
    assert pauses == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, LONGEST_PAUSE, LONGEST_PAUSE]
    states.opened(own_session=True)
    assert states.claim_broke() == FIRST_PAUSE, "a connection that opened starts with the first pause"
    clock.now += FIRST_PAUSE
    states.opened(own_session=False)
    assert states.lost() == FIRST_PAUSE


def test_each_opening_is_a_new_session_and_closing_opens_at_once_next_time():
    clock = Clock()
    states = ListenStates(clock)
    assert states.sessions == 0
    states.opened(own_session=True)
    states.lost()
    clock.now += FIRST_PAUSE
    states.opened(own_session=True)
    assert states.sessions == 2
    states.lost()  # paused
    states.closed()
    assert states.may_open() and states.retry_in() == 0


def test_a_connection_lost_in_a_state_the_diagram_has_no_arrow_for_is_closed_not_fatal(caplog):
    """Listen.lost() meeting IllegalMove (a bug) logs it and closes: the worker goes on."""
    from django_dbjobs.db.listen import Listen

    listen = Listen("default")
    listen.lost(ConnectionError("gone"))  # CLOSED: nothing was open to lose
    assert listen.states.state is State.CLOSED and listen.states.may_open()
    assert "unexpected state" in caplog.text
