// Input: pointer gestures (mouse, touch, pen) and keys on the board, turned into the seeds' actions.
//   tap a top card          → `tap` (its foundation); refused → the card is selected
//   tap a card in a column  → selects the run above it (only a run a move could take: else says why);
//                             tap a foundation's card → selects it
//   tap a pile, selection   → `move` of the selection there (also when the tap that picks it up
//                             still awaits its reply)
//   double tap a card       → `auto` (the server's best place), unless the first tap already moved it;
//                             the second tap of a gesture never acts on what was drawn under it since
//   drag a card or a run    → `move` where it is dropped; refused → it snaps back, with the reason
// Keyboard: the cards are buttons and empty piles take focus (Enter/Space tap them); Esc, f, a and u
// act on the selection.
// The server decides every move: nothing here knows a rule.

const DRAG_THRESHOLD_PX = 6;
export const DOUBLE_TAP_MS = 350;  // a second tap this soon after the first, ... (the browser tests read it)
const DOUBLE_TAP_SLOP_PX = 32;     // ... this near it, is the same gesture
const SNAP_BACK_MS = 160;

function isRefusal(reply) {
  return reply !== null && reply !== undefined && reply.type === "error";
}

/**
 * Listen on `boardNode`; `app` supplies playable(), getSelection(), setSelection(sel|null), and the
 * requests tap(pile), auto(pile, n), move(from, to, n), undo() (each a promise of the reply or null),
 * plus refused(reply) to show a refusal, liftProblem(pile, n) (why those cards cannot be picked up
 * together, or null) and explain(text) to say it.
 */
export function bindInput(boardNode, app) {
  let press = null;    // the pointer that went down on the board and has not come up
  let lastTap = null;  // the first tap of the latest gesture (for double taps); null after a key or drag
  let gestures = 0;    // counts gestures (taps not part of a double tap, and drags)
  let awaited = null;  // the latest tap sent to its foundation whose reply has not come

  function locate(target) {
    const pileNode = target.closest("[data-pile]");
    if (!pileNode || !boardNode.contains(pileNode)) return null;
    const cardNode = target.closest("[data-card]");
    const count = pileNode.querySelectorAll("[data-card]").length;
    const index = cardNode ? Number(cardNode.dataset.index) : null;
    return { pileNode, pile: pileNode.dataset.pile, cardNode, index, n: cardNode ? count - index : 0 };
  }

  function select(where) {
    app.setSelection(where ? { pile: where.pile, n: where.n } : null);
  }

  function showRefusal(reply) {
    if (isRefusal(reply)) app.refused(reply);
  }

  /** Whether a tap at `point` on `where` belongs to the gesture of the tap before: soon after it, at its
   * place, on its pile (piles never move; the cards drawn in them may have changed since). */
  function sameGesture(previous, where, point) {
    return previous !== null && point !== null && point.time - previous.time < DOUBLE_TAP_MS
      && where.pile === previous.pile
      && Math.hypot(point.x - previous.x, point.y - previous.y) <= DOUBLE_TAP_SLOP_PX;
  }

  /**
   * A tap at `point` ({x, y, time}; null for a key). A second tap of one gesture is never read from
   * what is drawn under it now (the first tap's reply may have redrawn the board): it upgrades the
   * first tap to a double tap, or does nothing. One gesture is one action.
   */
  function tapAt(where, point) {
    if (sameGesture(lastTap, where, point)) {
      const first = lastTap;
      first.time = point.time;  // a third tap at once is still this gesture
      if (!first.doubled) {
        first.doubled = true;
        secondTap(first);
      }
      return;
    }
    gestures += 1;
    const record = { ...point, seq: gestures, pile: where.pile, n: where.n, onCard: Boolean(where.cardNode),
      kind: "none", reply: null, doubled: false };
    lastTap = point ? record : null;
    record.kind = singleTap(where, record);
  }

  /** What one tap does; returns its kind: "move", "tap" (sent to its foundation), "card" or "none". */
  function singleTap(where, record) {
    const selection = app.getSelection();
    if (!selection && awaited && awaited.pile !== where.pile) {
      moveOnceRefused(awaited, where, record);
      return "move";
    }
    if (selection && selection.pile !== where.pile) {
      select(null);
      app.move(selection.pile, where.pile, selection.n)?.then(showRefusal);
      return "move";
    }
    if (!where.cardNode) {
      select(null);
      return "none";
    }
    if (selection && selection.n === where.n) {
      select(null);
      return "card";
    }
    if (where.n === 1 && where.pile[0] !== "f" && !selection) {
      record.reply = app.tap(where.pile);
      awaited = record.reply ? record : null;
      record.reply?.then((reply) => {
        if (awaited === record) awaited = null;
        // Not to its foundation: the card is picked up instead (unless a later tap took over).
        if (isRefusal(reply) && reply.code === "illegal_move" && !record.doubled && record.seq === gestures) {
          select(where);
        }
      });
      return "tap";
    }
    const problem = app.liftProblem(where.pile, where.n);
    if (problem) {
      select(null);
      app.explain(problem);  // nothing is picked up that no move could take; a double tap still asks
    } else select(where);
    return "card";
  }

  /**
   * A tap on another pile while the tap on `first`'s card awaits its reply (a slow network, or a quick
   * hand): had the reply come, the card would be picked up and this tap would move it, so it does,
   * once the reply says the card did not go home, unless another gesture came meanwhile.
   */
  function moveOnceRefused(first, where, record) {
    awaited = null;
    first.reply.then((reply) => {
      if (isRefusal(reply) && reply.code === "illegal_move" && record.seq === gestures) {
        app.move(first.pile, where.pile, first.n)?.then(showRefusal);
      }
    });
  }

  /** The second tap of a gesture on a card: the double tap's move, unless the first tap moved a card. */
  async function secondTap(first) {
    if (!first.onCard || first.kind === "move" || first.kind === "none" || first.pile[0] === "f") return;
    select(null);
    if (first.kind === "tap") {
      const reply = first.reply ? await first.reply : null;
      if (!isRefusal(reply) || reply.code !== "illegal_move") return;  // it went home (or no answer)
      if (first.seq !== gestures) return;  // another gesture came meanwhile: the board is not the same
    }
    app.auto(first.pile, first.n)?.then(showRefusal);
  }

  // Dragging ------------------------------------------------------------------------------------------

  function startDrag(event) {
    const cards = [...press.pileNode.querySelectorAll("[data-card]")].slice(press.index);
    const first = cards[0].getBoundingClientRect();
    const ghost = document.createElement("div");
    ghost.className = "drag-ghost";
    ghost.style.left = `${first.left}px`;
    ghost.style.top = `${first.top}px`;
    ghost.append(...cards.map((card) => card.cloneNode(true)));
    document.body.append(ghost);
    for (const card of cards) card.classList.add("lifted");
    press.drag = { ghost, cards };
    lastTap = null;
    gestures += 1;
    select(null);
    try { boardNode.setPointerCapture(event.pointerId); } catch { /* the pointer is already gone */ }
  }

  function dropTargetAt(x, y) {
    const node = document.elementFromPoint(x, y);
    return node ? locate(node) : null;
  }

  function markDropTarget(where) {
    for (const node of boardNode.querySelectorAll(".drop-target")) node.classList.remove("drop-target");
    if (where && where.pile !== press.pile) where.pileNode.classList.add("drop-target");
  }

  function endDrag(drag, { snapBack }) {
    markDropTarget(null);
    const finish = () => {
      drag.ghost.remove();
      for (const card of drag.cards) card.classList.remove("lifted");
    };
    if (!snapBack) {
      requestAnimationFrame(finish);  // after the board's own draw in that frame, which slides from the ghost
      return;
    }
    drag.ghost.classList.add("snapping");
    drag.ghost.style.transform = "translate(0px, 0px)";
    setTimeout(finish, SNAP_BACK_MS + 40);
  }

  async function drop(dragged, x, y) {
    const target = dropTargetAt(x, y);
    if (!target || target.pile === dragged.pile) {
      endDrag(dragged.drag, { snapBack: true });
      return;
    }
    const reply = await app.move(dragged.pile, target.pile, dragged.n);
    const refused = reply === null || reply === undefined || isRefusal(reply);
    endDrag(dragged.drag, { snapBack: refused });
    showRefusal(reply);
  }

  // Pointer events --------------------------------------------------------------------------------------

  boardNode.addEventListener("pointerdown", (event) => {
    // A press whose release went unseen (released outside the window) is forgotten; a drag is not.
    if (!app.playable() || event.button !== 0 || (press && press.drag)) return;
    const where = locate(event.target);
    if (!where) return;
    press = { ...where, pointerId: event.pointerId, x: event.clientX, y: event.clientY, drag: null };
  });

  boardNode.addEventListener("pointermove", (event) => {
    if (!press || event.pointerId !== press.pointerId) return;
    const dx = event.clientX - press.x;
    const dy = event.clientY - press.y;
    if (!press.drag) {
      if (!press.cardNode || Math.hypot(dx, dy) < DRAG_THRESHOLD_PX) return;
      const problem = app.liftProblem(press.pile, press.n);
      if (problem) {
        press = null;  // not lifted; the rest of this press is neither a drag nor a tap
        lastTap = null;
        app.explain(problem);
        return;
      }
      startDrag(event);
    }
    press.drag.ghost.style.transform = `translate(${dx}px, ${dy}px)`;
    markDropTarget(dropTargetAt(event.clientX, event.clientY));
  });

  boardNode.addEventListener("pointerup", (event) => {
    if (!press || event.pointerId !== press.pointerId) return;
    const ended = press;
    press = null;
    if (ended.drag) drop(ended, event.clientX, event.clientY);
    else tapAt(ended, { x: event.clientX, y: event.clientY, time: event.timeStamp });
  });

  // The system took the pointer (a scroll, a call) or the board lost its capture: the drag is off.
  const abandon = (event) => {
    if (!press || event.pointerId !== press.pointerId) return;
    if (press.drag) endDrag(press.drag, { snapBack: true });
    press = null;
  };
  boardNode.addEventListener("pointercancel", abandon);
  boardNode.addEventListener("lostpointercapture", (event) => {
    // Only the board's own capture (taken at the drag's start, when a card's implicit one is let go);
    // after a drop `press` is already cleared.
    if (event.target === boardNode && press && press.drag) abandon(event);
  });

  boardNode.addEventListener("contextmenu", (event) => event.preventDefault());

  // Keyboard: Enter or Space on a focused card or pile is a tap (a click with detail 0); pointer clicks
  // were handled above.
  boardNode.addEventListener("click", (event) => {
    if (event.detail !== 0 || !app.playable()) return;
    const where = locate(event.target);
    if (where) tapAt(where, null);
  });

  document.addEventListener("keydown", (event) => {
    if (event.target.closest("input, select, textarea, dialog") || event.ctrlKey || event.metaKey || event.altKey) return;
    if (!app.playable()) return;
    const selection = app.getSelection();
    const emptyPile = event.target.matches("[data-pile]") ? locate(event.target) : null;
    if ((event.key === "Enter" || event.key === " ") && emptyPile) {
      event.preventDefault();  // an empty pile, focused: a tap on it (a card is a button: it clicks)
      tapAt(emptyPile, null);
    } else if (event.key === "Escape") select(null);
    else if (event.key === "u") app.undo()?.then(showRefusal);
    else if (selection && selection.pile[0] !== "f" && (event.key === "a" || (event.key === "f" && selection.n === 1))) {
      select(null);
      (event.key === "f" ? app.tap(selection.pile) : app.auto(selection.pile, selection.n))?.then(showRefusal);
    }
  });
}
