//! The emitter API, described once. The runtime's installed globals, the LuaLS definitions
//! written by `hailfire mods stubs` and the API tables of `docs/MODDING.md` are all tested
//! against this list (`tests` below and `tests/content.rs`), and the firing functions'
//! unknown-field check ("did you mean `speed`?") reads its field lists from here.

/// One global function of the emitter API.
pub struct ApiFn {
    pub name: &'static str,
    /// Parameters as `(name, LuaLS type, doc)`; a `?` after the name marks it optional.
    pub params: &'static [(&'static str, &'static str, &'static str)],
    /// LuaLS return types (empty: nothing useful).
    pub returns: &'static [&'static str],
    pub doc: &'static str,
    /// Written in Lua (the prelude) rather than installed from Rust.
    pub prelude: bool,
}

/// A field of a firing table.
pub struct Field {
    pub name: &'static str,
    pub ty: &'static str,
    pub doc: &'static str,
}

/// Fields every firing function (`shot`, `ring`, `fan`) accepts.
pub const SHOT_FIELDS: &[Field] = &[
    Field { name: "kind", ty: "string", doc: "Bullet kind id (from any loaded mod). Default \"orb\"." },
    Field { name: "x", ty: "number", doc: "Where the bullet starts. Default: the owner's position." },
    Field { name: "y", ty: "number", doc: "Where the bullet starts. Default: the owner's position." },
    Field {
        name: "angle",
        ty: "number",
        doc: "Direction in degrees (ring: the first bullet's; fan: the centre). Default 90 (down).",
    },
    Field { name: "speed", ty: "number", doc: "Pixels per tick. Default 3." },
    Field { name: "accel", ty: "number", doc: "Pixels per tick², along the direction of travel. Default 0." },
    Field { name: "max_speed", ty: "number", doc: "Cap for accelerating bullets. Default: none." },
    Field { name: "turn", ty: "number", doc: "Degrees per tick; positive curves clockwise. Default 0." },
    Field { name: "lifetime", ty: "integer", doc: "Ticks, 1..3600. Default 300." },
    Field { name: "offset", ty: "number", doc: "Start this many px along the direction from (x, y). Default 0." },
    Field { name: "radius", ty: "number", doc: "Overrides the kind's radius for this shot." },
    Field { name: "damage", ty: "integer", doc: "Overrides the kind's damage for this shot." },
];

/// Fields only `ring` accepts, besides `SHOT_FIELDS`.
pub const RING_FIELDS: &[Field] =
    &[Field { name: "n", ty: "integer", doc: "Bullets evenly around the circle, 1..720 (required)." }];

/// Fields only `fan` accepts, besides `SHOT_FIELDS`.
pub const FAN_FIELDS: &[Field] = &[
    Field { name: "n", ty: "integer", doc: "Bullets in the fan, 1..720 (required)." },
    Field { name: "spread", ty: "number", doc: "Degrees from the first bullet to the last, at most 360. Default 30." },
    Field {
        name: "aim",
        ty: "string|integer",
        doc: "Centre the fan on a player: \"nearest\", \"farthest\", \"random\" or a player id. Wins over `angle`.",
    },
];

/// Fields `telegraph` accepts: a line (`angle` or `aim`, `length`) or a circle (`radius`).
pub const TELEGRAPH_FIELDS: &[Field] = &[
    Field {
        name: "x",
        ty: "number",
        doc: "Where it starts (a line) or its centre (a circle). Default: the owner's position.",
    },
    Field {
        name: "y",
        ty: "number",
        doc: "Where it starts (a line) or its centre (a circle). Default: the owner's position.",
    },
    Field { name: "angle", ty: "number", doc: "A line's direction in degrees. Default 90 (down)." },
    Field {
        name: "aim",
        ty: "string|integer",
        doc: "Point the line at a player: \"nearest\", \"farthest\", \"random\" or a player id. Wins over `angle`.",
    },
    Field { name: "length", ty: "number", doc: "A line's length, px, 1..4096. Default 600." },
    Field {
        name: "radius",
        ty: "number",
        doc: "Makes it a circle of this radius, px, 1..4096 (a glow before a dash or a burst).",
    },
    Field { name: "width", ty: "number", doc: "A line's width, px, 1..64. Default 3." },
    Field { name: "ticks", ty: "integer", doc: "How long it shows, 1..240 ticks. Default 30 (half a second)." },
    Field {
        name: "safe",
        ty: "boolean",
        doc: "A place to stand in (drawn gold, like a downed teammate's revive ring), not a warning (red). Default false.",
    },
];

/// Every global function a script can call, in the order `docs/MODDING.md` lists them.
pub const FUNCTIONS: &[ApiFn] = &[
    ApiFn {
        name: "wait",
        params: &[("n?", "integer", "ticks, at least 1 (default 1)")],
        returns: &[],
        doc: "Suspends this coroutine for `n` ticks.",
        prelude: true,
    },
    ApiFn {
        name: "wait_until",
        params: &[
            ("pred", "fun(): boolean", "called once a tick"),
            ("max_ticks?", "integer", "give up after this many ticks (nil: never)"),
        ],
        returns: &["boolean"],
        doc: "Waits until `pred()` is true (returns true) or `max_ticks` pass (returns false).",
        prelude: true,
    },
    ApiFn {
        name: "task",
        params: &[("fn", "fun()", "the sub-coroutine's body")],
        returns: &[],
        doc: "Starts `fn` as a sub-coroutine of the same owner; it dies with the owner or phase.",
        prelude: false,
    },
    ApiFn {
        name: "every",
        params: &[
            ("interval", "integer", "ticks between calls"),
            ("times", "integer?", "how many calls (nil: forever)"),
            ("fn", "fun(i: integer)", "called with 1, 2, ..."),
        ],
        returns: &[],
        doc: "A task that calls `fn(i)` every `interval` ticks, `times` times.",
        prelude: true,
    },
    ApiFn { name: "tick", params: &[], returns: &["integer"], doc: "The current simulation tick.", prelude: false },
    ApiFn {
        name: "party_size",
        params: &[],
        returns: &["integer"],
        doc: "The party this run is scaled for: the players in the dungeon when its first wave came (before that, those here now). Enemy and boss HP already grow with it; use it to thicken patterns for a crowd.",
        prelude: false,
    },
    ApiFn {
        name: "shot",
        params: &[("t", "hf.Shot", "the bullet")],
        returns: &[],
        doc: "Fires one bullet.",
        prelude: false,
    },
    ApiFn {
        name: "ring",
        params: &[("t", "hf.Ring", "the ring")],
        returns: &[],
        doc: "Fires `n` bullets evenly around a circle starting at `angle` (one network event).",
        prelude: false,
    },
    ApiFn {
        name: "fan",
        params: &[("t", "hf.Fan", "the fan")],
        returns: &[],
        doc: "Fires `n` bullets spread over `spread` degrees centred on `angle` or on a player (one network event).",
        prelude: false,
    },
    ApiFn {
        name: "aim",
        params: &[("target?", "string|integer", "\"nearest\" (default), \"farthest\", \"random\" or a player id")],
        returns: &["number"],
        doc: "The angle in degrees from the owner to a living player; 90 when nobody is alive.",
        prelude: false,
    },
    ApiFn {
        name: "angle_to",
        params: &[("x", "number", ""), ("y", "number", "")],
        returns: &["number"],
        doc: "The angle in degrees from the owner to a point.",
        prelude: false,
    },
    ApiFn {
        name: "pos",
        params: &[],
        returns: &["number", "number"],
        doc: "The owner's position `x, y`.",
        prelude: false,
    },
    ApiFn {
        name: "me",
        params: &[],
        returns: &["hf.Me"],
        doc: "The owner: position, HP, phase (from 1), and `id` (enemy) or `boss = true`.",
        prelude: false,
    },
    ApiFn {
        name: "players",
        params: &[],
        returns: &["hf.Player[]"],
        doc: "Every player in the instance.",
        prelude: false,
    },
    ApiFn {
        name: "nearest",
        params: &[],
        returns: &["hf.Player?"],
        doc: "The nearest living player (with `dist`), or nil.",
        prelude: true,
    },
    ApiFn {
        name: "arena",
        params: &[],
        returns: &["number", "number"],
        doc: "The arena's `width, height` in px.",
        prelude: false,
    },
    ApiFn {
        name: "enemy_count",
        params: &[],
        returns: &["integer"],
        doc: "Enemies alive in the fight as this tick began (the caller too, if it is one; not the boss).",
        prelude: false,
    },
    ApiFn {
        name: "rules",
        params: &[],
        returns: &["hf.Rules"],
        doc: "The game's fixed rules (the same for every mod): tick rate, a player's HP, speed and hitbox, the graze, flare and revive distances and times.",
        prelude: false,
    },
    ApiFn {
        name: "move_to",
        params: &[
            ("x", "number", ""),
            ("y", "number", ""),
            ("ticks?", "integer", "arrive after this many ticks (default 60)"),
        ],
        returns: &[],
        doc: "Moves the owner in a straight line; overrides its behaviour meanwhile.",
        prelude: false,
    },
    ApiFn {
        name: "leave",
        params: &[],
        returns: &[],
        doc: "The calling enemy leaves the fight at the end of the tick: gone without dying (no kill), its scripts stopped. A boss cannot.",
        prelude: false,
    },
    ApiFn {
        name: "spawn",
        params: &[
            ("enemy_id", "string", "an enemy id from any loaded mod"),
            ("x?", "number", "default: the owner's x"),
            ("y?", "number", "default: the owner's y"),
        ],
        returns: &[],
        doc: "Spawns an enemy; an unknown id is an error.",
        prelude: false,
    },
    ApiFn {
        name: "sfx",
        params: &[("name", "string", "one of the game's sounds or a mod's sounds/NAME.ogg|wav (see docs/MODDING.md)")],
        returns: &[],
        doc: "Plays a sound effect at the owner's position; an unknown name plays nothing (the checker warns).",
        prelude: false,
    },
    ApiFn {
        name: "hint",
        params: &[("text", "string", "1..=160 bytes; {fire}, {focus}, {flare}, {escape}, {interact}, {move} show the player's keys")],
        returns: &[],
        doc: "Shows every player in the fight a line of text at the top of the screen for eight seconds (a tutorial's lesson). At most 4 a tick.",
        prelude: false,
    },
    ApiFn {
        name: "telegraph",
        params: &[("t", "hf.Telegraph", "the warning")],
        returns: &[],
        doc: "Shows players where an attack will go before it comes: a thin line (aimed shots, dashes) or a glowing circle. Only a picture; at most 64 a tick.",
        prelude: false,
    },
    ApiFn {
        name: "log",
        params: &[("...", "any", "")],
        returns: &[],
        doc: "Writes a line to the server log (at most 16 a tick).",
        prelude: false,
    },
    ApiFn { name: "print", params: &[("...", "any", "")], returns: &[], doc: "The same as `log`.", prelude: false },
    ApiFn {
        name: "rand",
        params: &[("a?", "number", "lower bound"), ("b?", "number", "upper bound")],
        returns: &["number"],
        doc: "A number in [0, 1), or in [a, b); seeded per instance.",
        prelude: false,
    },
    ApiFn {
        name: "rand_int",
        params: &[("a", "integer", ""), ("b", "integer", "")],
        returns: &["integer"],
        doc: "An integer in [a, b]; seeded per instance.",
        prelude: false,
    },
];

/// The game's own sounds, which it synthesises (`app::audio`); `sfx(name)` also plays a
/// mod's `sounds/NAME.wav|ogg`, which may not take one of these names.
pub const SOUNDS: &[&str] =
    &["shotgun", "sniper", "summon", "fire", "hit_taken", "hit_dealt", "death", "phase", "portal", "escape", "cleared"];

/// The closest known name to `got` (for "did you mean"), if it is close enough. Two
/// letters swapped count as one slip ("wiat" is "wait", not "hint").
pub fn suggest<'a>(got: &str, known: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    fn dist(a: &str, b: &str) -> usize {
        let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
        // Optimal string alignment: edits, and adjacent transpositions as one.
        let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
        for (i, row) in d.iter_mut().enumerate() {
            row[0] = i;
        }
        for (j, cell) in d[0].iter_mut().enumerate() {
            *cell = j;
        }
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                let cost = usize::from(a[i - 1] != b[j - 1]);
                d[i][j] = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                    d[i][j] = d[i][j].min(d[i - 2][j - 2] + 1);
                }
            }
        }
        d[a.len()][b.len()]
    }
    known
        .map(|k| (dist(got, k), k))
        .filter(|(d, k)| *d <= if k.len() <= 3 { 1 } else { (k.len().max(got.len()) / 3).max(2) })
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

fn class(out: &mut String, name: &str, doc: &str, fields: &[&[Field]]) {
    // `(exact)`: the editor flags a field the class does not declare (a misspelling).
    out.push_str(&format!("---{doc}\n---@class (exact) {name}\n"));
    for f in fields.iter().copied().flatten() {
        let opt = if f.doc.contains("(required)") { "" } else { "?" };
        out.push_str(&format!("---@field {}{opt} {} {}\n", f.name, f.ty, f.doc));
    }
    out.push('\n');
}

/// The LuaLS definitions file (`hailfire.d.lua`) for a mod's editor.
pub fn stubs() -> String {
    let mut s = String::from(
        "---@meta\n-- Hailfire emitter API, for lua-language-server. Written by `hailfire mods stubs`;\n-- do not edit (run the command again after updating Hailfire).\n\n",
    );
    class(&mut s, "hf.Shot", "One bullet: every field is optional.", &[SHOT_FIELDS]);
    class(&mut s, "hf.Ring", "A ring of `n` bullets; the other fields as for a shot.", &[RING_FIELDS, SHOT_FIELDS]);
    class(&mut s, "hf.Fan", "A fan of `n` bullets; the other fields as for a shot.", &[FAN_FIELDS, SHOT_FIELDS]);
    class(
        &mut s,
        "hf.Telegraph",
        "A warning: a line (`angle` or `aim`, `length`) or a circle (`radius`).",
        &[TELEGRAPH_FIELDS],
    );
    s.push_str("---@class hf.Player\n---@field id integer\n---@field x number\n---@field y number\n---@field hp integer\n---@field alive boolean\n---@field dist? number Only from `nearest()`.\n\n");
    s.push_str("---The emitter's arguments from its TOML entry (`{ id = \"...\", args = { ... } }`); an empty table when it has none.\n---@type table<string, any>\nargs = {}\n\n");
    s.push_str("---@class hf.Rules\n---@field tick_rate integer Ticks a second.\n---@field player_hp integer A player's full HP.\n---@field player_speed number A player's speed in px a second (unfocused).\n---@field hitbox_radius number The radius of a player's hitbox in px.\n---@field graze_radius number A bullet passing this close to a player's hitbox (without hitting) grazes it (px).\n---@field flare_radius number A flare clears bullets this far around its player (px).\n---@field downed_ticks integer How long a downed player waits for a teammate.\n---@field revive_range number A teammate this close (px)...\n---@field revive_ticks integer ...for this many ticks in a row revives a downed player.\n\n");
    s.push_str("---@class hf.Me\n---@field x number\n---@field y number\n---@field hp integer\n---@field max_hp integer\n---@field phase integer From 1.\n---@field id? integer An enemy's id.\n---@field boss? boolean True for a boss.\n\n");
    for f in FUNCTIONS {
        s.push_str(&format!("---{}\n", f.doc));
        for (p, ty, doc) in f.params {
            let (name, opt) = match p.strip_suffix('?') {
                Some(n) => (n, "?"),
                None => (*p, ""),
            };
            s.push_str(&format!("---@param {name}{opt} {ty} {doc}\n"));
        }
        for r in f.returns {
            s.push_str(&format!("---@return {r}\n"));
        }
        let names: Vec<&str> = f.params.iter().map(|(p, _, _)| p.trim_end_matches('?')).collect();
        s.push_str(&format!("function {}({}) end\n\n", f.name, names.join(", ")));
    }
    s
}

/// `.luarc.json` for a mod folder: Lua 5.4, the definitions file, and nothing that the
/// sandbox removes (io, os, debug, package) offered by completion.
pub fn luarc() -> String {
    "{\n  \"$schema\": \"https://raw.githubusercontent.com/LuaLS/vscode-lua/master/setting/schema.json\",\n  \"runtime.version\": \"Lua 5.4\",\n  \"runtime.builtin\": { \"io\": \"disable\", \"os\": \"disable\", \"debug\": \"disable\", \"package\": \"disable\" },\n  \"workspace.library\": [\"hailfire.d.lua\"],\n  \"workspace.checkThirdParty\": false\n}\n".to_string()
}
