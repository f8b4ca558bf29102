//! Player names: one sanitiser for the desktop game, the bot, the client and the server, so
//! a name the game accepts is a name the server accepts (the wire limit is in bytes).

use super::messages::MAX_NAME;

/// Characters that are never shown: control characters, and the invisible format
/// characters that reorder or hide text (bidirectional overrides and isolates, zero-width
/// joiners and spaces, the byte-order mark, soft hyphens, tag characters, variation
/// selectors, interlinear annotations). A name with U+202E would otherwise print backwards
/// in a log line or the roster and could make one player's name look like another's.
pub fn invisible(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
            | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}'
            | '\u{FFF0}'..='\u{FFFB}' | '\u{1D173}'..='\u{1D17A}' | '\u{E0000}'..='\u{E0FFF}')
}

/// Text safe for one log line: invisible characters (`invisible`) become `?`.
pub fn for_log(text: &str) -> String {
    text.chars().map(|c| if invisible(c) { '?' } else { c }).collect()
}

/// The name as it goes on the wire and into the world: invisible characters removed,
/// surrounding spaces trimmed, cut to at most `MAX_NAME` bytes on a character boundary;
/// "player" when nothing is left.
pub fn sanitize(name: &str) -> String {
    let clean: String = name.chars().filter(|c| !invisible(*c)).collect();
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
/// and other invisible characters become spaces, cut to at most `max` bytes on a character boundary.
pub fn clip(text: &str, max: usize) -> String {
    let clean: String = text.chars().map(|c| if invisible(c) { ' ' } else { c }).collect();
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

    #[test]
    fn direction_overrides_and_invisible_characters_never_reach_a_name_or_a_log() {
        assert_eq!(sanitize("evil\u{202E}nimda"), "evilnimda");
        assert_eq!(sanitize("a\u{200B}b\u{2066}c\u{FEFF}\u{E0041}"), "abc");
        assert_eq!(sanitize("\u{202E}\u{200D}"), "player");
        assert_eq!(clip("x\u{202E}y", 10), "x y");
        assert_eq!(for_log("bob\u{202E}\n"), "bob??");
        assert_eq!(sanitize("Zoë 日本"), "Zoë 日本", "ordinary letters stay");
    }
}
