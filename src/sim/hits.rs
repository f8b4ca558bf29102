//! Hit detection, circle against circle, with a uniform-grid broad phase over the targets.
//!
//! Targets (players, or the boss then enemies) are few and bullets many, so the grid is
//! built over targets, each inserted into every cell its circle (padded by the largest
//! bullet radius) touches; each bullet then tests only the targets in its own cell, in
//! priority order. The first overlap consumes the bullet.

use super::bullets::{BulletPool, Team};
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
    fn cell_xy(&self, p: Vec2) -> (i32, i32) {
        let cx = ((p.x - self.origin) / CELL) as i32;
        let cy = ((p.y - self.origin) / CELL) as i32;
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

    pub fn query(&self, p: Vec2) -> &[u16] {
        if self.start.is_empty() {
            return &[];
        }
        let (cx, cy) = self.cell_xy(p);
        let c = (cy * self.cols + cx) as usize;
        &self.items[self.start[c] as usize..self.start[c + 1] as usize]
    }
}

/// Finds, for each live bullet of `team`, the first target (in priority order) it
/// overlaps, and appends `(bullet slot, target index)`. Bullets are not removed here.
pub fn find_hits(pool: &BulletPool, team: Team, targets: &[Circle], grid: &Grid, hits: &mut Vec<(usize, u16)>) {
    if targets.is_empty() {
        return;
    }
    for i in 0..pool.len() {
        if pool.team[i] != team || pool.life[i] == 0 {
            continue;
        }
        let (bx, by, br) = (pool.x[i], pool.y[i], pool.radius[i]);
        for &t in grid.query(Vec2::new(bx, by)) {
            let c = &targets[t as usize];
            let (dx, dy) = (bx - c.pos.x, by - c.pos.y);
            let rr = br + c.r;
            if dx * dx + dy * dy <= rr * rr {
                hits.push((i, t));
                break;
            }
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
    }
}
