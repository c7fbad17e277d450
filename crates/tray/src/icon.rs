//! The tray icon's pixels, composed in Rust (RGBA, no image files needed):
//! an envelope, and a badge in the top-right corner for the [`Badge`] kind —
//! nothing (plain envelope), unread (blue dot with the count), attention
//! (red dot with the count: a decision request or urgent mail waits),
//! offline (the envelope greyed with an amber "!" dot).

use crate::ui::Badge;

pub const SIZE: u32 = 64;

const SLATE: [u8; 4] = [0x3b, 0x4a, 0x63, 0xff];
const PAPER: [u8; 4] = [0xf4, 0xf6, 0xfa, 0xff];
const GREY: [u8; 4] = [0x8d, 0x95, 0xa6, 0xff];
const BLUE: [u8; 4] = [0x3b, 0x6e, 0xf5, 0xff];
const RED: [u8; 4] = [0xd6, 0x45, 0x45, 0xff];
const AMBER: [u8; 4] = [0xe0, 0x95, 0x1f, 0xff];
const WHITE: [u8; 4] = [0xff, 0xff, 0xff, 0xff];

struct Canvas {
    w: u32,
    px: Vec<u8>,
}

impl Canvas {
    fn new(w: u32) -> Canvas {
        Canvas { w, px: vec![0; (w * w * 4) as usize] }
    }
    /// Blends `c` at coverage `a` (0..=1) over the pixel.
    fn blend(&mut self, x: i32, y: i32, c: [u8; 4], a: f32) {
        if x < 0 || y < 0 || x >= self.w as i32 || y >= self.w as i32 || a <= 0.0 {
            return;
        }
        let i = ((y as u32 * self.w + x as u32) * 4) as usize;
        let a = a.min(1.0) * (c[3] as f32 / 255.0);
        let da = self.px[i + 3] as f32 / 255.0;
        let out_a = a + da * (1.0 - a);
        for (k, &ck) in c.iter().enumerate().take(3) {
            let s = ck as f32;
            let d = self.px[i + k] as f32;
            let v = if out_a > 0.0 { (s * a + d * da * (1.0 - a)) / out_a } else { 0.0 };
            self.px[i + k] = v.round() as u8;
        }
        self.px[i + 3] = (out_a * 255.0).round() as u8;
    }
    /// Fills where `inside(px, py)` gives a signed distance (< 0 inside), anti-aliased.
    fn fill(&mut self, c: [u8; 4], sdf: impl Fn(f32, f32) -> f32) {
        for y in 0..self.w as i32 {
            for x in 0..self.w as i32 {
                let d = sdf(x as f32 + 0.5, y as f32 + 0.5);
                let cov = (0.5 - d).clamp(0.0, 1.0);
                self.blend(x, y, c, cov);
            }
        }
    }
    fn circle(&mut self, cx: f32, cy: f32, r: f32, c: [u8; 4]) {
        self.fill(c, |x, y| ((x - cx).powi(2) + (y - cy).powi(2)).sqrt() - r);
    }
    fn rounded_rect(&mut self, x0: f32, y0: f32, x1: f32, y1: f32, r: f32, c: [u8; 4]) {
        let (cx, cy) = ((x0 + x1) / 2.0, (y0 + y1) / 2.0);
        let (hx, hy) = ((x1 - x0) / 2.0 - r, (y1 - y0) / 2.0 - r);
        self.fill(c, |x, y| {
            let qx = (x - cx).abs() - hx;
            let qy = (y - cy).abs() - hy;
            let ox = qx.max(0.0);
            let oy = qy.max(0.0);
            (ox * ox + oy * oy).sqrt() + qx.max(qy).min(0.0) - r
        });
    }
    fn line(&mut self, (ax, ay): (f32, f32), (bx, by): (f32, f32), width: f32, c: [u8; 4]) {
        self.fill(c, |x, y| {
            let (px, py, dx, dy) = (x - ax, y - ay, bx - ax, by - ay);
            let t = ((px * dx + py * dy) / (dx * dx + dy * dy)).clamp(0.0, 1.0);
            ((px - dx * t).powi(2) + (py - dy * t).powi(2)).sqrt() - width / 2.0
        });
    }
    /// 3×5 pixel glyphs, scaled.
    fn text(&mut self, s: &str, cx: f32, cy: f32, scale: f32, c: [u8; 4]) {
        let glyphs: Vec<&[u8; 5]> = s.chars().filter_map(glyph).collect();
        let n = glyphs.len() as f32;
        let total_w = n * 3.0 * scale + (n - 1.0).max(0.0) * scale;
        let x0 = cx - total_w / 2.0;
        let y0 = cy - 2.5 * scale;
        for (gi, g) in glyphs.iter().enumerate() {
            let gx = x0 + gi as f32 * 4.0 * scale;
            for (row, bits) in g.iter().enumerate() {
                for col in 0..3 {
                    if bits & (0b100 >> col) != 0 {
                        let (px0, py0) = (gx + col as f32 * scale, y0 + row as f32 * scale);
                        for y in py0.floor() as i32..(py0 + scale).ceil() as i32 {
                            for x in px0.floor() as i32..(px0 + scale).ceil() as i32 {
                                let cov_x = ((x as f32 + 1.0).min(px0 + scale) - (x as f32).max(px0)).clamp(0.0, 1.0);
                                let cov_y = ((y as f32 + 1.0).min(py0 + scale) - (y as f32).max(py0)).clamp(0.0, 1.0);
                                self.blend(x, y, c, cov_x * cov_y);
                            }
                        }
                    }
                }
            }
        }
    }
}

fn glyph(c: char) -> Option<&'static [u8; 5]> {
    const G: [[u8; 5]; 12] = [
        [0b111, 0b101, 0b101, 0b101, 0b111], // 0
        [0b010, 0b110, 0b010, 0b010, 0b111], // 1
        [0b111, 0b001, 0b111, 0b100, 0b111], // 2
        [0b111, 0b001, 0b111, 0b001, 0b111], // 3
        [0b101, 0b101, 0b111, 0b001, 0b001], // 4
        [0b111, 0b100, 0b111, 0b001, 0b111], // 5
        [0b111, 0b100, 0b111, 0b101, 0b111], // 6
        [0b111, 0b001, 0b010, 0b010, 0b010], // 7
        [0b111, 0b101, 0b111, 0b101, 0b111], // 8
        [0b111, 0b101, 0b111, 0b001, 0b111], // 9
        [0b000, 0b010, 0b111, 0b010, 0b000], // +
        [0b010, 0b010, 0b010, 0b000, 0b010], // !
    ];
    Some(match c {
        '0'..='9' => &G[c as usize - '0' as usize],
        '+' => &G[10],
        '!' => &G[11],
        _ => return None,
    })
}

/// The count as it fits in the badge: 1–9, then "9+" .
pub fn badge_text(n: u32) -> String {
    if n > 9 {
        "9+".into()
    } else {
        n.to_string()
    }
}

/// RGBA pixels, `SIZE`×`SIZE`, row-major.
pub fn compose(badge: &Badge) -> Vec<u8> {
    let s = SIZE as f32;
    let mut c = Canvas::new(SIZE);
    let (body, edge) = match badge {
        Badge::Offline => (PAPER, GREY),
        _ => (PAPER, SLATE),
    };
    // envelope: outline, paper, flap
    c.rounded_rect(4.0, 14.0, s - 6.0, s - 8.0, 6.0, edge);
    c.rounded_rect(8.0, 18.0, s - 10.0, s - 12.0, 3.0, body);
    c.line((10.0, 21.0), (s / 2.0 - 1.0, 38.0), 4.0, edge);
    c.line((s / 2.0 - 1.0, 38.0), (s - 12.0, 21.0), 4.0, edge);
    let dot = |c: &mut Canvas, color: [u8; 4], text: &str| {
        let (cx, cy, r) = (s - 17.0, 17.0, 16.0);
        c.circle(cx, cy, r + 2.5, [0, 0, 0, 0x40]);
        c.circle(cx, cy, r, color);
        let scale = if text.chars().count() > 1 { 3.2 } else { 4.4 };
        c.text(text, cx, cy, scale, WHITE);
    };
    match badge {
        Badge::None => {}
        Badge::Unread(n) => dot(&mut c, BLUE, &badge_text(*n)),
        Badge::Attention(n) => dot(&mut c, RED, &badge_text((*n).max(1))),
        Badge::Offline => dot(&mut c, AMBER, "!"),
    }
    c.px
}

/// Minimal PNG encoder (stored deflate blocks, no compression) so icons can be
/// written to files without an image crate (used by the icon generator).
pub fn png(rgba: &[u8], w: u32, h: u32) -> Vec<u8> {
    fn crc32(data: &[u8]) -> u32 {
        let mut c = 0xffff_ffffu32;
        for &b in data {
            c ^= b as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 { 0xedb8_8320 ^ (c >> 1) } else { c >> 1 };
            }
        }
        !c
    }
    fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
        out.extend_from_slice(&(data.len() as u32).to_be_bytes());
        let mut body = kind.to_vec();
        body.extend_from_slice(data);
        out.extend_from_slice(&body);
        out.extend_from_slice(&crc32(&body).to_be_bytes());
    }
    let mut raw = Vec::with_capacity(((w * 4 + 1) * h) as usize);
    for y in 0..h as usize {
        raw.push(0);
        raw.extend_from_slice(&rgba[y * w as usize * 4..(y + 1) * w as usize * 4]);
    }
    let mut z = vec![0x78, 0x01];
    let mut chunks = raw.chunks(65_535).peekable();
    while let Some(block) = chunks.next() {
        z.push(if chunks.peek().is_none() { 1 } else { 0 });
        z.extend_from_slice(&(block.len() as u16).to_le_bytes());
        z.extend_from_slice(&(!(block.len() as u16)).to_le_bytes());
        z.extend_from_slice(block);
    }
    let (mut a, mut b) = (1u32, 0u32);
    for &x in &raw {
        a = (a + x as u32) % 65_521;
        b = (b + a) % 65_521;
    }
    z.extend_from_slice(&((b << 16) | a).to_be_bytes());
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, 6, 0, 0, 0]);
    chunk(&mut out, b"IHDR", &ihdr);
    chunk(&mut out, b"IDAT", &z);
    chunk(&mut out, b"IEND", &[]);
    out
}
