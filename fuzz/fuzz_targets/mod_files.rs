//! The mod loader's TOML reader: any text as a definitions file, manifest or hub file.
#![no_main]
use hailfire::content::toml_doc::TomlDoc;
use hailfire::sim::defs::{BossDef, BulletKindDef, DungeonDef, EnemyDef, HubDef};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut diags = Vec::new();
    if let Some(doc) = TomlDoc::parse("fuzz.toml", text.to_string(), "fuzz", &mut diags) {
        let _ = doc.entries::<BulletKindDef>("fuzz", &mut diags);
        let _ = doc.entries::<EnemyDef>("fuzz", &mut diags);
        let _ = doc.entries::<BossDef>("fuzz", &mut diags);
        let _ = doc.entries::<DungeonDef>("fuzz", &mut diags);
    }
    let _ = toml::from_str::<HubDef>(text);
    let _ = toml::from_str::<hailfire::content::manifest::Manifest>(text);
    for d in &diags {
        let _ = d.to_string();
    }
});
