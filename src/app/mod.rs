//! The desktop program: window and loop (`window`), renderer (`render`), menus and HUD
//! (`ui`), input, audio, settings, and the game session. `--dedicated` never comes here.

pub mod attract;
pub mod audio;
pub mod icon;
pub mod input;
pub mod music;
pub mod preview;
pub mod preview_window;
pub mod profile;
pub mod render;
pub mod replay_window;
pub mod scenes;
pub mod session;
pub mod settings;
pub mod ui;
pub mod window;

pub use window::AppOptions;

/// Opens the window and runs the game until the player quits.
pub fn run(opts: AppOptions) -> anyhow::Result<()> {
    let event_loop = winit::event_loop::EventLoop::new().map_err(|e| {
        anyhow::anyhow!(
            "cannot open a window: no display available ({e}). For a headless server use `hailfire --dedicated`."
        )
    })?;
    let content = crate::content::Content::load_default();
    for d in &content.diagnostics {
        tracing::warn!("{d}");
    }
    let mut app = window::App::new(opts, content);
    event_loop.run_app(&mut app)?;
    if let Some(e) = app.fatal.take() {
        anyhow::bail!(e);
    }
    Ok(())
}
