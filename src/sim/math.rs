//! A small 2D vector and angle helpers (degrees in the API, radians inside).

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
    /// Unit vector for an angle in degrees (0 = right, 90 = down).
    pub fn from_angle_deg(deg: f32) -> Vec2 {
        let (s, c) = deg.to_radians().sin_cos();
        Vec2::new(c, s)
    }
    /// Angle in degrees of this vector, in (-180, 180].
    pub fn angle_deg(self) -> f32 {
        self.y.atan2(self.x).to_degrees()
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
