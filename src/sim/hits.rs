//! Hit detection, circle against circle, with a uniform-grid broad phase over the targets.
//!
//! Targets (players, or the boss then enemies) are few and bullets many, so the grid is
//! built over targets, each inserted into every cell its circle (padded by the largest
//! bullet radius) touches; each bullet then tests only the targets in its own cell, in
//! priority order. The first overlap consumes the bullet.

use super::bullets::{BulletPool, Team};
use super::config::GRAZE_RADIUS;
use super::math::Vec2;

const CELL: f32 = 64.0;

#[derive(Clone, Copy, Debug)]
pub struct Circle {
    pub pos: Vec2,
    pub r: f32,
}

/// A counting-sort grid: `start[c]..start[c+1]` indexes `items` for cell `c`.
#[derive(Default, Debug)]
pub struct Grid {
    cols: i32,
    rows: i32,
    origin: f32,
    start: Vec<u32>,
    items: Vec<u16>,
    cells_of: Vec<(i32, i32, i32, i32)>,
}

impl Grid {
    #[inline]
    fn cell_xy(&self, p: Vec2) -> (i32, i32) {
        // Times 1/64, exactly the same as dividing by the power of two 64.
        let cx = ((p.x - self.origin) * (1.0 / CELL)) as i32;
        let cy = ((p.y - self.origin) * (1.0 / CELL)) as i32;
        (cx.clamp(0, self.cols - 1), cy.clamp(0, self.rows - 1))
    }

    /// Rebuilds the grid over `targets` (in priority order) for an arena of `bounds`.
    pub fn build(&mut self, bounds: Vec2, targets: &[Circle], pad: f32) {
        let margin = super::config::ARENA_MARGIN + pad + 64.0;
        self.origin = -margin;
        self.cols = (((bounds.x + 2.0 * margin) / CELL).ceil() as i32).clamp(1, 4096);
        self.rows = (((bounds.y + 2.0 * margin) / CELL).ceil() as i32).clamp(1, 4096);
        let n = (self.cols * self.rows) as usize;
        self.start.clear();
        self.start.resize(n + 1, 0);
        self.cells_of.clear();
        for t in targets {
            let r = t.r + pad;
            let (x0, y0) = self.cell_xy(Vec2::new(t.pos.x - r, t.pos.y - r));
            let (x1, y1) = self.cell_xy(Vec2::new(t.pos.x + r, t.pos.y + r));
            self.cells_of.push((x0, y0, x1, y1));
            for cy in y0..=y1 {
                for cx in x0..=x1 {
                    self.start[(cy * self.cols + cx) as usize + 1] += 1;
                }
            }
        }
        for c in 0..n {
            self.start[c + 1] += self.start[c];
        }
        self.items.clear();
        self.items.resize(self.start[n] as usize, 0);
        let mut fill = self.start.clone();
        for (ti, &(x0, y0, x1, y1)) in self.cells_of.iter().enumerate() {
            for cy in y0..=y1 {
                for cx in x0..=x1 {
                    let c = (cy * self.cols + cx) as usize;
                    self.items[fill[c] as usize] = ti as u16;
                    fill[c] += 1;
                }
            }
        }
    }

    #[inline]
    pub fn query(&self, p: Vec2) -> &[u16] {
        if self.start.is_empty() {
            return &[];
        }
        let (cx, cy) = self.cell_xy(p);
        let c = (cy * self.cols + cx) as usize;
        &self.items[self.start[c] as usize..self.start[c + 1] as usize]
    }
}

/// Up to this many targets, every bullet tests every target (a few multiplications beat
/// finding a grid cell); beyond, the grid.
pub const BRUTE_FORCE_TARGETS: usize = 8;

/// Finds, for each live bullet of `team`, the first target (in priority order) it
/// overlaps, and appends `(bullet slot, target index)`. Bullets are not removed here.
/// The same hits, in the same order, whether through the grid or not. `grid` must have
/// been built over `targets` when there are more than [`BRUTE_FORCE_TARGETS`].
pub fn find_hits(pool: &BulletPool, team: Team, targets: &[Circle], grid: &Grid, hits: &mut Vec<(usize, u16)>) {
    find_hits_and_grazes(pool, team, targets, grid, hits, None);
}

/// As [`find_hits`], and in the same pass, with `grazes`, each `(bullet slot, target)`
/// within `GRAZE_RADIUS` of a target's edge that it does not hit (the first such target
/// in priority order; bullets that hit anything are not grazes). The grid must have been
/// built with the graze radius in its padding.
pub fn find_hits_and_grazes(
    pool: &BulletPool,
    team: Team,
    targets: &[Circle],
    grid: &Grid,
    hits: &mut Vec<(usize, u16)>,
    grazes: Option<&mut Vec<(usize, u16)>>,
) {
    if targets.is_empty() {
        return;
    }
    if targets.len() <= BRUTE_FORCE_TARGETS {
        brute_force(pool, team, targets, hits, grazes);
    } else {
        gridded(pool, team, targets, grid, hits, grazes);
    }
}

/// Every bullet against every target, in priority order. (A branch-free version that
/// computed every bullet's first target for the vectoriser, target by target, was slower:
/// it reads the arrays once per target, and hits are rare, so these branches predict well.)
pub(crate) fn brute_force(
    pool: &BulletPool,
    team: Team,
    targets: &[Circle],
    hits: &mut Vec<(usize, u16)>,
    grazes: Option<&mut Vec<(usize, u16)>>,
) {
    let n = pool.len();
    let (xs, ys, rs) = (&pool.x[..n], &pool.y[..n], &pool.radius[..n]);
    let (teams, life) = (&pool.team[..n], &pool.life[..n]);
    let Some(grazes) = grazes else {
        for i in 0..n {
            if teams[i] != team || life[i] == 0 {
                continue;
            }
            let (bx, by, br) = (xs[i], ys[i], rs[i]);
            for (t, c) in targets.iter().enumerate() {
                let (dx, dy) = (bx - c.pos.x, by - c.pos.y);
                let rr = br + c.r;
                if dx * dx + dy * dy <= rr * rr {
                    hits.push((i, t as u16));
                    break;
                }
            }
        }
        return;
    };
    for i in 0..n {
        if teams[i] != team || life[i] == 0 {
            continue;
        }
        let (bx, by, br) = (xs[i], ys[i], rs[i]);
        // Most bullets are far from every target: one branch-free test against the graze
        // distance of each, and only the few near one look closer.
        let mut near = false;
        for c in targets {
            let (dx, dy) = (bx - c.pos.x, by - c.pos.y);
            let gg = br + c.r + GRAZE_RADIUS;
            near |= dx * dx + dy * dy <= gg * gg;
        }
        if !near {
            continue;
        }
        let mut graze = u16::MAX;
        for (t, c) in targets.iter().enumerate() {
            let (dx, dy) = (bx - c.pos.x, by - c.pos.y);
            let d2 = dx * dx + dy * dy;
            let rr = br + c.r;
            if d2 <= rr * rr {
                hits.push((i, t as u16));
                graze = u16::MAX;
                break;
            }
            let gg = rr + GRAZE_RADIUS;
            if graze == u16::MAX && d2 <= gg * gg {
                graze = t as u16;
            }
        }
        if graze != u16::MAX {
            grazes.push((i, graze));
        }
    }
}

/// Through the grid: each bullet tests only the targets in its own cell.
pub(crate) fn gridded(
    pool: &BulletPool,
    team: Team,
    targets: &[Circle],
    grid: &Grid,
    hits: &mut Vec<(usize, u16)>,
    mut grazes: Option<&mut Vec<(usize, u16)>>,
) {
    let g = if grazes.is_some() { GRAZE_RADIUS } else { 0.0 };
    for i in 0..pool.len() {
        if pool.team[i] != team || pool.life[i] == 0 {
            continue;
        }
        let (bx, by, br) = (pool.x[i], pool.y[i], pool.radius[i]);
        let mut graze = u16::MAX;
        let mut hit = false;
        for &t in grid.query(Vec2::new(bx, by)) {
            let c = &targets[t as usize];
            let (dx, dy) = (bx - c.pos.x, by - c.pos.y);
            let d2 = dx * dx + dy * dy;
            let rr = br + c.r;
            if d2 <= rr * rr {
                hits.push((i, t));
                hit = true;
                break;
            }
            let gg = rr + g;
            if graze == u16::MAX && g > 0.0 && d2 <= gg * gg {
                graze = t;
            }
        }
        if let (Some(gz), false, true) = (grazes.as_deref_mut(), hit, graze != u16::MAX) {
            gz.push((i, graze));
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::bullets::BulletSpawn;

    #[test]
    fn grid_matches_brute_force() {
        let bounds = Vec2::new(800.0, 600.0);
        let mut rng = crate::sim::rng::Rng::new(7);
        let targets: Vec<Circle> = (0..20)
            .map(|_| Circle {
                pos: Vec2::new(rng.next_f64() as f32 * 800.0, rng.next_f64() as f32 * 600.0),
                r: 4.0 + rng.next_f64() as f32 * 40.0,
            })
            .collect();
        let mut pool = BulletPool::new();
        for uid in 0..3000u32 {
            let s = BulletSpawn {
                uid,
                pos: Vec2::new(rng.next_f64() as f32 * 900.0 - 50.0, rng.next_f64() as f32 * 700.0 - 50.0),
                angle: 0.0,
                speed: 0.0,
                radius: 2.0 + rng.next_f64() as f32 * 10.0,
                lifetime: 10,
                kind: 0,
                team: Team::Player,
                accel: 0.0,
                turn: 0.0,
                max_speed: f32::INFINITY,
                tick: 0,
            };
            pool.spawn(&s, 1);
        }
        let mut grid = Grid::default();
        grid.build(bounds, &targets, 12.0);
        let mut hits = Vec::new();
        find_hits(&pool, Team::Player, &targets, &grid, &mut hits);
        let mut brute = Vec::new();
        for i in 0..pool.len() {
            for (t, c) in targets.iter().enumerate() {
                if pool.pos(i).distance(c.pos) <= pool.radius[i] + c.r {
                    brute.push((i, t as u16));
                    break;
                }
            }
        }
        assert!(!brute.is_empty());
        assert_eq!(hits, brute);
        // Both paths of find_hits give the same hits in the same order, whatever the
        // number of targets (the brute-force one serves up to BRUTE_FORCE_TARGETS).
        for n in [1, 3, BRUTE_FORCE_TARGETS, 20] {
            let t = &targets[..n];
            grid.build(bounds, t, 12.0);
            let (mut a, mut b) = (Vec::new(), Vec::new());
            super::brute_force(&pool, Team::Player, t, &mut a, None);
            super::gridded(&pool, Team::Player, t, &grid, &mut b, None);
            assert!(!a.is_empty(), "{n} targets: some hits");
            assert_eq!(a, b, "{n} targets");
            // With grazes: the same hits, and the same grazes both ways (the grid padded
            // by the graze radius), none of them a bullet that hit.
            grid.build(bounds, t, 12.0 + GRAZE_RADIUS);
            let (mut a2, mut b2, mut ga, mut gb) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            super::brute_force(&pool, Team::Player, t, &mut a2, Some(&mut ga));
            super::gridded(&pool, Team::Player, t, &grid, &mut b2, Some(&mut gb));
            assert_eq!((&a2, &b2), (&a, &a), "{n} targets: grazing changes no hit");
            assert!(!ga.is_empty(), "{n} targets: some grazes");
            assert_eq!(ga, gb, "{n} targets: grazes");
            for &(i, tg) in &ga {
                assert!(!a.iter().any(|&(h, _)| h == i), "a bullet that hit is no graze");
                let c = &t[tg as usize];
                let d = pool.pos(i).distance(c.pos);
                assert!(d > pool.radius[i] + c.r && d <= pool.radius[i] + c.r + GRAZE_RADIUS + 1e-3);
            }
        }
    }
}
