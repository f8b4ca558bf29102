//! A small 2D vector and angle helpers (degrees in the API, radians inside), and the one
//! place the simulation gets its transcendental functions from.
//!
//! **Determinism rule:** every `sin`, `cos`, `atan2`, `exp`, `pow`, ... on the simulation
//! path goes through [`portable`], which is the pure-Rust `libm` crate (a port of musl's
//! libm): the same bits on every OS, libc and CPU. `f32::sin`, `f32::sin_cos`,
//! `f32::atan2`, `powf`, `powi` and `mul_add` call the platform's libm or compiler
//! intrinsics, whose last bit differs between Windows, macOS and glibc, so they are never
//! used in `sim`. `sqrt`, `+ - * /`, `round`, `floor`, `abs`, `clamp`, `rem_euclid` and
//! `as` casts are exact IEEE 754 / Rust-defined operations and are fine.
//! `tests/simulation.rs` pins golden hashes of whole fights; see `docs/ARCHITECTURE.md`.

use std::ops::{Add, Mul, Sub};

#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Vec2 {
    pub x: f32,
    pub y: f32,
}

impl Vec2 {
    pub const ZERO: Vec2 = Vec2 { x: 0.0, y: 0.0 };
    pub const fn new(x: f32, y: f32) -> Self {
        Vec2 { x, y }
    }
    pub fn length(self) -> f32 {
        (self.x * self.x + self.y * self.y).sqrt()
    }
    pub fn length_sq(self) -> f32 {
        self.x * self.x + self.y * self.y
    }
    pub fn distance(self, o: Vec2) -> f32 {
        (self - o).length()
    }
    pub fn dot(self, o: Vec2) -> f32 {
        self.x * o.x + self.y * o.y
    }
    /// Unit vector for an angle in degrees (0 = right, 90 = down).
    pub fn from_angle_deg(deg: f32) -> Vec2 {
        let (s, c) = portable::sin_cos(deg.to_radians());
        Vec2::new(c, s)
    }
    /// Angle in degrees of this vector, in (-180, 180].
    pub fn angle_deg(self) -> f32 {
        portable::atan2(self.y, self.x).to_degrees()
    }
    /// Clamp to the unit disc (the one rule that makes a move vector legal).
    pub fn clamp_unit(self) -> Vec2 {
        let l2 = self.length_sq();
        if !l2.is_finite() {
            return Vec2::ZERO;
        }
        if l2 > 1.0 {
            let l = l2.sqrt();
            Vec2::new(self.x / l, self.y / l)
        } else {
            self
        }
    }
    pub fn lerp(self, o: Vec2, t: f32) -> Vec2 {
        self + (o - self) * t
    }
}

impl Add for Vec2 {
    type Output = Vec2;
    fn add(self, o: Vec2) -> Vec2 {
        Vec2::new(self.x + o.x, self.y + o.y)
    }
}
impl Sub for Vec2 {
    type Output = Vec2;
    fn sub(self, o: Vec2) -> Vec2 {
        Vec2::new(self.x - o.x, self.y - o.y)
    }
}
impl Mul<f32> for Vec2 {
    type Output = Vec2;
    fn mul(self, k: f32) -> Vec2 {
        Vec2::new(self.x * k, self.y * k)
    }
}

/// Transcendental functions with the same bits everywhere (see the module docs). Scripts
/// get the `f64` versions through the Lua `math` table (`content::lua`).
pub mod portable {
    #[inline]
    pub fn sin_cos(x: f32) -> (f32, f32) {
        libm::sincosf(x)
    }
    #[inline]
    pub fn sin(x: f32) -> f32 {
        libm::sinf(x)
    }
    #[inline]
    pub fn cos(x: f32) -> f32 {
        libm::cosf(x)
    }
    #[inline]
    pub fn atan2(y: f32, x: f32) -> f32 {
        libm::atan2f(y, x)
    }
    #[inline]
    pub fn exp(x: f32) -> f32 {
        libm::expf(x)
    }
    #[inline]
    pub fn pow(x: f32, y: f32) -> f32 {
        libm::powf(x, y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A few bit patterns from musl's algorithms, computed once on Linux x86-64. If these
    /// fail, the portable functions are not what the golden hashes were made with.
    #[test]
    fn portable_bits_are_pinned() {
        assert_eq!(Vec2::from_angle_deg(14.0).x.to_bits(), 0x3f78_654d);
        assert_eq!(Vec2::from_angle_deg(14.0).y.to_bits(), 0x3e77_ba60);
        assert_eq!(Vec2::new(-3.0, 7.0).angle_deg().to_bits(), 0x42e2_65ae);
        assert_eq!(portable::sin(1.0e6).to_bits(), 0xbeb3_3259);
        // An argument where musl's sinf and glibc's disagree in the last bit: the portable
        // function must give musl's answer on every platform.
        // (glibc 2.36 on x86-64 gives 0x3dc2_447b here.)
        assert_eq!(portable::sin(f32::from_bits(0x3dc2_8f5d)).to_bits(), 0x3dc2_447a);
    }
}
