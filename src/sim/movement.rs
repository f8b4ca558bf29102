//! Player movement: the one function the server steps and the client replays when it
//! predicts, so prediction and authority cannot disagree about the rules.

use super::config::{FOCUS_SPEED, PLAYER_HITBOX_RADIUS, PLAYER_SPEED};
use super::math::Vec2;
use super::player::{InputFrame, BTN_FOCUS};

/// Clamps a move vector to the unit disc; non-finite input means "not moving".
pub fn sanitize_move(v: Vec2) -> Vec2 {
    if !v.x.is_finite() || !v.y.is_finite() {
        return Vec2::ZERO;
    }
    v.clamp_unit()
}

/// One tick of a frame's movement: focus (held) moves at `FOCUS_SPEED`. The server steps
/// players with this and the client replays its frames through it.
pub fn step_frame(pos: Vec2, f: &InputFrame, bounds: Vec2) -> Vec2 {
    let mv = if f.held(BTN_FOCUS) { sanitize_move(f.mv) * FOCUS_SPEED } else { f.mv };
    step_player(pos, mv, bounds)
}

/// One tick of movement inside an arena of `bounds` (width, height).
pub fn step_player(pos: Vec2, mv: Vec2, bounds: Vec2) -> Vec2 {
    let p = pos + sanitize_move(mv) * PLAYER_SPEED;
    let r = PLAYER_HITBOX_RADIUS;
    Vec2::new(p.x.clamp(r, (bounds.x - r).max(r)), p.y.clamp(r, (bounds.y - r).max(r)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_vector_moves_faster_than_the_constant() {
        let b = Vec2::new(1000.0, 1000.0);
        let start = Vec2::new(500.0, 500.0);
        for v in [Vec2::new(1.27, 1.27), Vec2::new(100.0, 0.0), Vec2::new(f32::NAN, 1.0), Vec2::new(0.6, 0.8)] {
            let d = step_player(start, v, b).distance(start);
            assert!(d <= PLAYER_SPEED + 1e-4, "{v:?} moved {d}");
        }
        assert_eq!(step_player(start, Vec2::new(f32::INFINITY, 0.0), b), start);
    }

    #[test]
    fn arena_edges_hold() {
        let b = Vec2::new(100.0, 100.0);
        let p = step_player(Vec2::new(6.0, 50.0), Vec2::new(-1.0, 0.0), b);
        assert_eq!(p.x, PLAYER_HITBOX_RADIUS);
    }
}
