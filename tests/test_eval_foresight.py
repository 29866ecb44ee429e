"""Foresight (evaluation/foresight.py): what a policy that knew every later reuse would lose."""

from __future__ import annotations

from eval_sessions import SENTENCE, call, filler, prompt, result, said
from fast_jev_compaction.conversation.messages import SessionMessage
from fast_jev_compaction.conversation.sizes import message_chars
from fast_jev_compaction.decide.policy import CHARS_PER_TOKEN
from fast_jev_compaction.evaluation.foresight import keep_smallest, prefix_foresight
from fast_jev_compaction.evaluation.labels import label_outputs
from fast_jev_compaction.evaluation.replay import replay_session

# A second quoted line, sharing no 8-word window with SENTENCE.
OTHER = "drain every pending queue before closing the worker pool cleanly"


def read(tool_use_id: str, quoted: str, chars: int) -> list[SessionMessage]:
    """A Read of about ``chars`` characters whose first line is ``quoted``."""
    body = "\n".join([quoted, *(f"value {n:05d} = {n * 7919 % 10007}" for n in range(chars // 20))])
    return [call(tool_use_id, "Read", file_path=f"/src/{tool_use_id}.py"), result(tool_use_id, body)]


def quote(tool_use_id: str, quoted: str) -> list[SessionMessage]:
    """An Edit whose old_string repeats ``quoted``."""
    return [call(tool_use_id, "Edit", file_path="/src/x.py", old_string=quoted, new_string="pass"),
            result(tool_use_id, "The file has been updated.")]


def window_for(messages: list[SessionMessage], fill: float) -> int:
    return round(sum(map(message_chars, messages)) / CHARS_PER_TOKEN * 100 / fill)


def test_keep_smallest_keeps_the_most_outputs_the_room_holds() -> None:
    assert keep_smallest({"a": 500, "b": 100, "c": 300}, 450) == {"b", "c"}
    assert keep_smallest({"a": 500}, 499) == set()


def test_a_reused_output_the_room_holds_is_kept_and_one_it_cannot_is_lost() -> None:
    small, large = read("r1", SENTENCE, 2_000), read("r2", OTHER, 20_000)
    head = [prompt("Fix the parser"), *small, *large, said("Read both.")]
    session = [*head, *quote("e1", SENTENCE), *quote("e2", OTHER), said("Done.")]
    labels = label_outputs(session)
    # the room under a 40 % target of a window the prefix fills to 60 % is two thirds of it:
    # the small read fits, the large one does not
    assert prefix_foresight(head, labels, window_for(head, 60), 40) == (2, 1)
    # in a window twice that size both fit
    assert prefix_foresight(head, labels, 2 * window_for(head, 60), 40) == (2, 0)


def test_a_reuse_another_text_already_answers_takes_no_room() -> None:
    large = read("r2", OTHER, 20_000)
    head = [prompt("Fix the pool"), *large, said(f"The first line reads: {OTHER}.")]
    session = [*head, *quote("e2", OTHER), said("Done.")]
    assert prefix_foresight(head, label_outputs(session), window_for(head, 60), 40) == (1, 0)


def test_a_reuse_an_output_kept_whole_answers_is_kept() -> None:
    """Two reads hold the quoted line: the room keeps the small one, which answers the large
    one's reuse too."""
    large, small = read("r2", SENTENCE, 20_000), read("r1", SENTENCE, 1_000)
    head = [prompt("Fix the parser"), *large, *small, said("Read both.")]
    session = [*head, *quote("e1", SENTENCE), said("Done.")]
    assert prefix_foresight(head, label_outputs(session), window_for(head, 60), 40) == (2, 0)


def test_an_output_not_reused_later_counts_for_nothing() -> None:
    head = [prompt("Look around"), *read("r1", SENTENCE, 20_000), said("Nothing to change.")]
    session = [*head, *filler(3), said("Done.")]
    assert prefix_foresight(head, label_outputs(session), window_for(head, 60), 40) == (0, 0)


def replayed(first_prompt: str) -> tuple[int, int]:
    """A large Read quoted in the next turn, beside one nobody quotes, replayed in a window the
    first turn ends at 70 % of (the plugin's trigger fires there): foresight's reuses and losses."""
    session = [prompt(first_prompt), *read("r1", SENTENCE, 12_000), *read("r2", OTHER, 12_000), *filler(4),
               said("Found it."), prompt("Change it"), *quote("e1", SENTENCE), said("Done.")]
    first_turn = sum(map(message_chars, session[:14])) / CHARS_PER_TOKEN
    tally = replay_session(session, round(first_turn / 0.7))
    return tally.foresight_reuses, tally.foresight_gone


def test_the_replay_counts_what_foresight_loses_at_its_own_passes() -> None:
    # the room of a 40 % target holds the quoted read once the other leaves
    assert replayed("Find the shutdown step") == (1, 0)
    # the user's last prompt, kept whole, takes the room the read needed
    assert replayed("Find the shutdown step. " + "Keep the existing behaviour for every other caller. " * 160) == (1, 1)
