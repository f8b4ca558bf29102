//! Player names: one sanitiser for the desktop game, the bot, the client and the server, so
//! a name the game accepts is a name the server accepts (the wire limit is in bytes).

use super::messages::MAX_NAME;

/// The name as it goes on the wire and into the world: control characters removed,
/// surrounding spaces trimmed, cut to at most `MAX_NAME` bytes on a character boundary;
/// "player" when nothing is left.
pub fn sanitize(name: &str) -> String {
    let clean: String = name.chars().filter(|c| !c.is_control()).collect();
    let clean = clean.trim();
    let mut end = clean.len().min(MAX_NAME);
    while !clean.is_char_boundary(end) {
        end -= 1;
    }
    let cut = clean[..end].trim_end();
    if cut.is_empty() {
        "player".to_string()
    } else {
        cut.to_string()
    }
}

/// Text for the wire (a server's name, message of the day, a notice, a reason): control
/// characters become spaces, cut to at most `max` bytes on a character boundary.
pub fn clip(text: &str, max: usize) -> String {
    let clean: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let mut end = clean.len().min(max);
    while !clean.is_char_boundary(end) {
        end -= 1;
    }
    clean[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_cut_by_bytes_on_a_character_boundary() {
        // 24 characters of two bytes each: 48 bytes, cut to 12 characters (24 bytes).
        let long = "é".repeat(24);
        let s = sanitize(&long);
        assert!(s.len() <= MAX_NAME, "{} bytes", s.len());
        assert_eq!(s, "é".repeat(12));
        // A three-byte character straddling the limit is dropped whole.
        let s = sanitize(&format!("{}€", "a".repeat(22)));
        assert_eq!(s, "a".repeat(22));
        assert_eq!(sanitize("  Zoë\n\t "), "Zoë");
        assert_eq!(sanitize("\u{7}\u{1b}"), "player");
        assert_eq!(sanitize("ok name"), "ok name");
        assert_eq!(clip("a\tb€", 5), "a b");
        assert_eq!(clip("short", 100), "short");
    }
}
