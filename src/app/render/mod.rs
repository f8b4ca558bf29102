//! The wgpu renderer: one instanced draw for every sprite (bullets, ships, enemies, the
//! boss, portals, the arena) with `shaders/sprites.wgsl`, then egui on top for text, the
//! HUD and menus. The same code renders to a window's surface and to an offscreen texture
//! (screenshots, golden-image tests, `hailfire render`).

pub mod scene;

use std::borrow::Cow;

use anyhow::{anyhow, Context};
use bytemuck::{Pod, Zeroable};

pub use scene::{Camera, Sprite};

const SHADER: &str = include_str!("../../../shaders/sprites.wgsl");

/// What a player without a working graphics driver is told (the details follow).
pub const NO_GPU_HINT: &str = "Hailfire could not find a graphics driver it can use. It needs Vulkan, \
Metal, DirectX 12 or OpenGL ES 3: update your graphics driver (on Debian or Ubuntu: \
sudo apt install mesa-vulkan-drivers). The dedicated server (hailfire --dedicated) needs none.";

/// What the app needs from the GPU.
pub struct Gpu {
    pub instance: wgpu::Instance,
    pub adapter: wgpu::Adapter,
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
}

impl Gpu {
    /// A device with no window (offscreen rendering, tests).
    pub fn headless() -> anyhow::Result<Gpu> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        Self::with(instance, None)
    }

    /// A device able to present to `surface`.
    pub fn with(instance: wgpu::Instance, surface: Option<&wgpu::Surface<'_>>) -> anyhow::Result<Gpu> {
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            force_fallback_adapter: false,
            compatible_surface: surface,
            apply_limit_buckets: false,
        }))
        .map_err(|e| anyhow!("{NO_GPU_HINT}\n\n(no usable graphics adapter: {e})"))?;
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("hailfire"),
            required_limits: wgpu::Limits::downlevel_webgl2_defaults().using_resolution(adapter.limits()),
            ..Default::default()
        }))
        .context("creating the graphics device")?;
        Ok(Gpu { instance, adapter, device, queue })
    }

    pub fn adapter_name(&self) -> String {
        let i = self.adapter.get_info();
        format!("{} ({:?})", i.name, i.backend)
    }
}

#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct CameraUniform {
    screen: [f32; 2],
    origin: [f32; 2],
    scale: f32,
    time: f32,
    arena: [f32; 2],
    /// x: enemy bullet outline strength; y, z, w unused.
    style: [f32; 4],
}

/// A bullet that must not show outside the arena's walls.
fn is_clipped(s: &Sprite) -> bool {
    (s.params[0] <= scene::SH_RING || s.params[0] == scene::SH_IMAGE_BULLET) && s.params[3] > 0.5
}

/// A pipeline drawing `Sprite` instances with the shader's entry points `entry` (vertex,
/// fragment) into `format` with `blend`.
fn sprite_pipeline(
    device: &wgpu::Device,
    module: &wgpu::ShaderModule,
    layout: &wgpu::PipelineLayout,
    entry: (&str, &str),
    format: wgpu::TextureFormat,
    blend: wgpu::BlendState,
) -> wgpu::RenderPipeline {
    device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
        label: Some(entry.1),
        layout: Some(layout),
        vertex: wgpu::VertexState {
            module,
            entry_point: Some(entry.0),
            compilation_options: Default::default(),
            buffers: &[Some(wgpu::VertexBufferLayout {
                array_stride: std::mem::size_of::<Sprite>() as u64,
                step_mode: wgpu::VertexStepMode::Instance,
                attributes: &wgpu::vertex_attr_array![0 => Float32x2, 1 => Float32x2, 2 => Float32x2, 3 => Float32x4, 4 => Float32x4],
            })],
        },
        fragment: Some(wgpu::FragmentState {
            module,
            entry_point: Some(entry.1),
            compilation_options: Default::default(),
            targets: &[Some(wgpu::ColorTargetState { format, blend: Some(blend), write_mask: wgpu::ColorWrites::ALL })],
        }),
        primitive: wgpu::PrimitiveState::default(),
        depth_stencil: None,
        multisample: wgpu::MultisampleState::default(),
        multiview_mask: None,
        cache: None,
    })
}

/// Sprites a frame can draw from the atlas (the shader's `rects` array).
pub const ATLAS_RECTS: usize = crate::media::MAX_SPRITES;

/// Mods' sprites packed into one texture (`crate::media::atlas_layout`).
struct Atlas {
    _texture: wgpu::Texture,
    view: wgpu::TextureView,
}

fn atlas_texture(device: &wgpu::Device, w: u32, h: u32) -> wgpu::Texture {
    device.create_texture(&wgpu::TextureDescriptor {
        label: Some("sprite atlas"),
        size: wgpu::Extent3d { width: w, height: h, depth_or_array_layers: 1 },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format: wgpu::TextureFormat::Rgba8UnormSrgb,
        usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
        view_formats: &[],
    })
}

/// A 1x1 transparent atlas (wgpu clears new textures), for content without sprites.
fn empty_atlas(device: &wgpu::Device) -> Atlas {
    let texture = atlas_texture(device, 1, 1);
    let view = texture.create_view(&Default::default());
    Atlas { _texture: texture, view }
}

/// The atlas of `sprites` and each one's place in it, in texture coordinates. Each is
/// decoded again here; the content validator has decoded it already, so a failure here
/// (which checked content cannot cause) leaves that sprite transparent, and sprites that
/// do not fit leave them all transparent.
fn make_atlas(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    sprites: &[crate::sim::client_defs::MediaAsset],
) -> (Atlas, Vec<[f32; 4]>) {
    let images: Vec<Option<crate::media::Image>> =
        sprites.iter().take(ATLAS_RECTS).map(|s| crate::media::decode_png(&s.bytes).ok()).collect();
    let sizes: Vec<(u32, u32)> = images.iter().map(|i| i.as_ref().map_or((1, 1), |i| (i.width, i.height))).collect();
    let Ok(places) = crate::media::atlas_layout(&sizes) else {
        // Checked content always fits; anything else draws no sprite at all.
        return (empty_atlas(device), vec![[0.0; 4]; sizes.len()]);
    };
    let w = places.iter().map(|p| p[0] + p[2] + crate::media::ATLAS_GUTTER).max().unwrap_or(1).max(1);
    let h = places.iter().map(|p| p[1] + p[3] + crate::media::ATLAS_GUTTER).max().unwrap_or(1).max(1);
    let mut pixels = vec![0u8; (w * h * 4) as usize];
    for (img, p) in images.iter().zip(&places) {
        let Some(img) = img else { continue };
        let row_bytes = (img.width * 4) as usize;
        for row in 0..img.height {
            let src = row as usize * row_bytes;
            let dst = (((p[1] + row) * w + p[0]) * 4) as usize;
            pixels[dst..dst + row_bytes].copy_from_slice(&img.rgba[src..src + row_bytes]);
        }
    }
    let texture = atlas_texture(device, w, h);
    queue.write_texture(
        wgpu::TexelCopyTextureInfo {
            texture: &texture,
            mip_level: 0,
            origin: wgpu::Origin3d::ZERO,
            aspect: wgpu::TextureAspect::All,
        },
        &pixels,
        wgpu::TexelCopyBufferLayout { offset: 0, bytes_per_row: Some(w * 4), rows_per_image: Some(h) },
        wgpu::Extent3d { width: w, height: h, depth_or_array_layers: 1 },
    );
    let rects = places
        .iter()
        .map(|p| [p[0] as f32 / w as f32, p[1] as f32 / h as f32, p[2] as f32 / w as f32, p[3] as f32 / h as f32])
        .collect();
    let view = texture.create_view(&Default::default());
    (Atlas { _texture: texture, view }, rects)
}

/// The instanced sprite pipeline.
pub struct SpriteRenderer {
    pipeline: wgpu::RenderPipeline,
    /// The same sprites as soft blobs into the bloom buffer (additive).
    bloom_pipeline: wgpu::RenderPipeline,
    uniform: wgpu::Buffer,
    bind_group: wgpu::BindGroup,
    layout: wgpu::BindGroupLayout,
    sampler: wgpu::Sampler,
    /// Each atlas sprite's place, in texture coordinates (`ATLAS_RECTS` of them).
    rects: wgpu::Buffer,
    atlas: Atlas,
    /// The sprites the atlas holds now.
    atlas_of: Vec<crate::sim::client_defs::MediaAsset>,
    instances: wgpu::Buffer,
    capacity: usize,
    count: u32,
    /// Sprites from this index on are bullets drawn only inside `scissor` (the arena).
    clipped_from: u32,
    scissor: [u32; 4],
    size: (u32, u32),
}

impl SpriteRenderer {
    pub fn new(device: &wgpu::Device, format: wgpu::TextureFormat) -> Self {
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("sprites"),
            source: wgpu::ShaderSource::Wgsl(Cow::Borrowed(SHADER)),
        });
        let uniform = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("camera"),
            size: std::mem::size_of::<CameraUniform>() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let uniform_entry = |binding| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::VERTEX_FRAGMENT,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        };
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("camera"),
            entries: &[
                uniform_entry(0),
                wgpu::BindGroupLayoutEntry {
                    binding: 1,
                    visibility: wgpu::ShaderStages::FRAGMENT,
                    ty: wgpu::BindingType::Texture {
                        sample_type: wgpu::TextureSampleType::Float { filterable: true },
                        view_dimension: wgpu::TextureViewDimension::D2,
                        multisampled: false,
                    },
                    count: None,
                },
                wgpu::BindGroupLayoutEntry {
                    binding: 2,
                    visibility: wgpu::ShaderStages::FRAGMENT,
                    ty: wgpu::BindingType::Sampler(wgpu::SamplerBindingType::Filtering),
                    count: None,
                },
                uniform_entry(3),
            ],
        });
        let sampler = device.create_sampler(&wgpu::SamplerDescriptor {
            label: Some("sprite atlas"),
            mag_filter: wgpu::FilterMode::Linear,
            min_filter: wgpu::FilterMode::Linear,
            address_mode_u: wgpu::AddressMode::ClampToEdge,
            address_mode_v: wgpu::AddressMode::ClampToEdge,
            ..Default::default()
        });
        let rects = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("sprite rects"),
            size: (ATLAS_RECTS * 16) as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let atlas = empty_atlas(device);
        let bind_group = Self::bind(device, &layout, &uniform, &atlas, &sampler, &rects);
        let pl = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("sprites"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        // The sprites, and the same instances as soft blobs into the glow buffer.
        let pipeline =
            sprite_pipeline(device, &module, &pl, ("vs_main", "fs_main"), format, wgpu::BlendState::ALPHA_BLENDING);
        let bloom_pipeline = sprite_pipeline(device, &module, &pl, ("vs_bloom", "fs_bloom"), BLOOM_FORMAT, ADD);
        let capacity = 1024;
        let instances = Self::make_buffer(device, capacity);
        SpriteRenderer {
            pipeline,
            bloom_pipeline,
            uniform,
            bind_group,
            layout,
            sampler,
            rects,
            atlas,
            atlas_of: Vec::new(),
            instances,
            capacity,
            count: 0,
            clipped_from: 0,
            scissor: [0; 4],
            size: (1, 1),
        }
    }

    fn bind(
        device: &wgpu::Device,
        layout: &wgpu::BindGroupLayout,
        uniform: &wgpu::Buffer,
        atlas: &Atlas,
        sampler: &wgpu::Sampler,
        rects: &wgpu::Buffer,
    ) -> wgpu::BindGroup {
        device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("camera"),
            layout,
            entries: &[
                wgpu::BindGroupEntry { binding: 0, resource: uniform.as_entire_binding() },
                wgpu::BindGroupEntry { binding: 1, resource: wgpu::BindingResource::TextureView(&atlas.view) },
                wgpu::BindGroupEntry { binding: 2, resource: wgpu::BindingResource::Sampler(sampler) },
                wgpu::BindGroupEntry { binding: 3, resource: rects.as_entire_binding() },
            ],
        })
    }

    /// Makes the atlas hold `sprites` (the content's). Nothing happens when it holds them
    /// already, so this can be called every frame.
    pub fn set_sprites(
        &mut self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        sprites: &[crate::sim::client_defs::MediaAsset],
    ) {
        if self.atlas_of == sprites {
            return;
        }
        self.atlas_of = sprites.to_vec();
        let mut rects = vec![[0f32; 4]; ATLAS_RECTS];
        self.atlas = if sprites.is_empty() {
            empty_atlas(device)
        } else {
            let (atlas, places) = make_atlas(device, queue, sprites);
            for (slot, r) in rects.iter_mut().zip(places) {
                *slot = r;
            }
            atlas
        };
        queue.write_buffer(&self.rects, 0, bytemuck::cast_slice(&rects));
        self.bind_group = Self::bind(device, &self.layout, &self.uniform, &self.atlas, &self.sampler, &self.rects);
    }

    fn make_buffer(device: &wgpu::Device, n: usize) -> wgpu::Buffer {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("sprite instances"),
            size: (n * std::mem::size_of::<Sprite>()) as u64,
            usage: wgpu::BufferUsages::VERTEX | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// Uploads the camera and this frame's sprites.
    pub fn prepare(
        &mut self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        size: (u32, u32),
        cam: &Camera,
        sprites: &[Sprite],
    ) {
        let u = CameraUniform {
            screen: [size.0 as f32, size.1 as f32],
            origin: [cam.origin.x, cam.origin.y],
            scale: cam.scale,
            time: cam.time,
            arena: [cam.arena.x, cam.arena.y],
            style: [cam.outline, cam.bloom, 0.0, 0.0],
        };
        queue.write_buffer(&self.uniform, 0, bytemuck::bytes_of(&u));
        if sprites.len() > self.capacity {
            self.capacity = sprites.len().next_power_of_two();
            self.instances = Self::make_buffer(device, self.capacity);
        }
        if !sprites.is_empty() {
            queue.write_buffer(&self.instances, 0, bytemuck::cast_slice(sprites));
        }
        self.count = sprites.len() as u32;
        // Bullets go last (see `scene::build`); they are clipped to the arena by a scissor
        // rectangle, which costs nothing per pixel (a test in the fragment shader cost 16 %
        // of the software-rendered frame).
        let tail = sprites.iter().rev().take_while(|s| is_clipped(s)).count();
        self.clipped_from = (sprites.len() - tail) as u32;
        let a = cam.world_to_screen(crate::sim::Vec2::new(0.0, 0.0));
        let b = cam.world_to_screen(cam.arena);
        let x0 = a.x.max(0.0).floor().min(size.0 as f32) as u32;
        let y0 = a.y.max(0.0).floor().min(size.1 as f32) as u32;
        let x1 = b.x.max(0.0).ceil().min(size.0 as f32) as u32;
        let y1 = b.y.max(0.0).ceil().min(size.1 as f32) as u32;
        self.scissor = [x0, y0, x1.saturating_sub(x0), y1.saturating_sub(y0)];
        self.size = size;
    }

    /// Draws every sprite with another pipeline that shares the layout (the bloom splat),
    /// into a target `1 / down` of the screen on each side, inside the arena only (what
    /// is outside it is not drawn, so nothing there may glow).
    fn draw_with(&self, pass: &mut wgpu::RenderPass<'_>, pipeline: &wgpu::RenderPipeline, down: u32) {
        let [x, y, w, h] = self.scissor;
        let (tw, th) = (self.size.0.div_ceil(down).max(1), self.size.1.div_ceil(down).max(1));
        let (x0, y0) = ((x / down).min(tw), (y / down).min(th));
        let (x1, y1) = ((x + w).div_ceil(down).min(tw), (y + h).div_ceil(down).min(th));
        if self.count == 0 || x1 <= x0 || y1 <= y0 {
            return;
        }
        pass.set_scissor_rect(x0, y0, x1 - x0, y1 - y0);
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.set_vertex_buffer(0, self.instances.slice(..));
        pass.draw(0..6, 0..self.count);
    }

    pub fn draw(&self, pass: &mut wgpu::RenderPass<'_>) {
        if self.count == 0 {
            return;
        }
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.set_vertex_buffer(0, self.instances.slice(..));
        pass.draw(0..6, 0..self.clipped_from);
        let [x, y, w, h] = self.scissor;
        if self.clipped_from < self.count && w > 0 && h > 0 {
            pass.set_scissor_rect(x, y, w, h);
            pass.draw(0..6, self.clipped_from..self.count);
            pass.set_scissor_rect(0, 0, self.size.0, self.size.1);
        }
    }
}

/// The bloom buffer's format (light adds up past 1 before the composite tones it down).
const BLOOM_FORMAT: wgpu::TextureFormat = wgpu::TextureFormat::Rgba16Float;
/// The bloom buffer is this many times smaller than the screen on each side.
const BLOOM_DOWNSCALE: u32 = 4;

/// Plain addition (colour), the destination's alpha kept.
const ADD: wgpu::BlendState = wgpu::BlendState {
    color: wgpu::BlendComponent {
        src_factor: wgpu::BlendFactor::One,
        dst_factor: wgpu::BlendFactor::One,
        operation: wgpu::BlendOperation::Add,
    },
    alpha: wgpu::BlendComponent {
        src_factor: wgpu::BlendFactor::Zero,
        dst_factor: wgpu::BlendFactor::One,
        operation: wgpu::BlendOperation::Add,
    },
};

const COMPOSITE: &str = r#"
@group(0) @binding(0) var glow: texture_2d<f32>;
@group(0) @binding(1) var linear: sampler;
struct V { @builtin(position) p: vec4<f32>, @location(0) uv: vec2<f32> };
@vertex fn vs(@builtin(vertex_index) i: u32) -> V {
    let x = f32((i << 1u) & 2u);
    let y = f32(i & 2u);
    var o: V;
    o.p = vec4(x * 2.0 - 1.0, 1.0 - y * 2.0, 0.0, 1.0);
    o.uv = vec2(x, y);
    return o;
}
// Added over the frame; 1 - e^-x keeps a dense field from burning to white.
@fragment fn fs(v: V) -> @location(0) vec4<f32> {
    let c = textureSample(glow, linear, v.uv).rgb;
    return vec4(vec3(1.0) - exp(-c), 0.0);
}
"#;

/// The glow pass: a quarter-size buffer the sprites are splatted into as soft blobs, and
/// the pipeline that adds it back over the frame (bilinear upscaling smooths it).
pub struct Bloom {
    composite: wgpu::RenderPipeline,
    layout: wgpu::BindGroupLayout,
    sampler: wgpu::Sampler,
    /// The buffer for the screen size it was made for.
    target: Option<BloomTarget>,
}

struct BloomTarget {
    size: (u32, u32),
    view: wgpu::TextureView,
    group: wgpu::BindGroup,
}

impl Bloom {
    fn new(device: &wgpu::Device, format: wgpu::TextureFormat) -> Bloom {
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("bloom composite"),
            source: wgpu::ShaderSource::Wgsl(Cow::Borrowed(COMPOSITE)),
        });
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("bloom"),
            entries: &[
                wgpu::BindGroupLayoutEntry {
                    binding: 0,
                    visibility: wgpu::ShaderStages::FRAGMENT,
                    ty: wgpu::BindingType::Texture {
                        sample_type: wgpu::TextureSampleType::Float { filterable: true },
                        view_dimension: wgpu::TextureViewDimension::D2,
                        multisampled: false,
                    },
                    count: None,
                },
                wgpu::BindGroupLayoutEntry {
                    binding: 1,
                    visibility: wgpu::ShaderStages::FRAGMENT,
                    ty: wgpu::BindingType::Sampler(wgpu::SamplerBindingType::Filtering),
                    count: None,
                },
            ],
        });
        let pl = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("bloom composite"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let composite = device.create_render_pipeline(&wgpu::RenderPipelineDescriptor {
            label: Some("bloom composite"),
            layout: Some(&pl),
            vertex: wgpu::VertexState {
                module: &module,
                entry_point: Some("vs"),
                compilation_options: Default::default(),
                buffers: &[],
            },
            fragment: Some(wgpu::FragmentState {
                module: &module,
                entry_point: Some("fs"),
                compilation_options: Default::default(),
                targets: &[Some(wgpu::ColorTargetState {
                    format,
                    blend: Some(ADD),
                    write_mask: wgpu::ColorWrites::ALL,
                })],
            }),
            primitive: wgpu::PrimitiveState::default(),
            depth_stencil: None,
            multisample: wgpu::MultisampleState::default(),
            multiview_mask: None,
            cache: None,
        });
        let sampler = device.create_sampler(&wgpu::SamplerDescriptor {
            label: Some("bloom"),
            mag_filter: wgpu::FilterMode::Linear,
            min_filter: wgpu::FilterMode::Linear,
            address_mode_u: wgpu::AddressMode::ClampToEdge,
            address_mode_v: wgpu::AddressMode::ClampToEdge,
            ..Default::default()
        });
        Bloom { composite, layout, sampler, target: None }
    }

    /// The buffer for a screen of `size`, made (again) when the size changes.
    fn target(&mut self, device: &wgpu::Device, size: (u32, u32)) -> &BloomTarget {
        if self.target.as_ref().map(|t| t.size) != Some(size) {
            let tex = device.create_texture(&wgpu::TextureDescriptor {
                label: Some("bloom"),
                size: wgpu::Extent3d {
                    width: size.0.div_ceil(BLOOM_DOWNSCALE).max(1),
                    height: size.1.div_ceil(BLOOM_DOWNSCALE).max(1),
                    depth_or_array_layers: 1,
                },
                mip_level_count: 1,
                sample_count: 1,
                dimension: wgpu::TextureDimension::D2,
                format: BLOOM_FORMAT,
                usage: wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::TEXTURE_BINDING,
                view_formats: &[],
            });
            let view = tex.create_view(&Default::default());
            let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("bloom"),
                layout: &self.layout,
                entries: &[
                    wgpu::BindGroupEntry { binding: 0, resource: wgpu::BindingResource::TextureView(&view) },
                    wgpu::BindGroupEntry { binding: 1, resource: wgpu::BindingResource::Sampler(&self.sampler) },
                ],
            });
            self.target = Some(BloomTarget { size, view, group });
        }
        self.target.as_ref().expect("made above")
    }
}

/// egui output ready to paint.
pub struct EguiFrame {
    pub primitives: Vec<egui::ClippedPrimitive>,
    pub textures: egui::TexturesDelta,
    pub pixels_per_point: f32,
}

/// Sprites plus egui, into any texture view.
pub struct Renderer {
    pub format: wgpu::TextureFormat,
    pub sprites: SpriteRenderer,
    pub bloom: Bloom,
    pub egui: egui_wgpu::Renderer,
}

/// The clear colour behind the arena (a deep blue-black).
pub const BACKGROUND: wgpu::Color = wgpu::Color { r: 0.008, g: 0.009, b: 0.018, a: 1.0 };

impl Renderer {
    pub fn new(device: &wgpu::Device, format: wgpu::TextureFormat) -> Self {
        Renderer {
            format,
            sprites: SpriteRenderer::new(device, format),
            bloom: Bloom::new(device, format),
            egui: egui_wgpu::Renderer::new(device, format, egui_wgpu::RendererOptions::default()),
        }
    }

    /// Records one frame into `view` (of `size` pixels).
    pub fn render(
        &mut self,
        gpu: &Gpu,
        view: &wgpu::TextureView,
        size: (u32, u32),
        cam: &Camera,
        sprites: &[Sprite],
        ui: Option<&mut EguiFrame>,
    ) -> wgpu::CommandBuffer {
        self.sprites.prepare(&gpu.device, &gpu.queue, size, cam, sprites);
        let mut enc = gpu.device.create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some("frame") });
        let screen = egui_wgpu::ScreenDescriptor {
            size_in_pixels: [size.0, size.1],
            pixels_per_point: ui.as_ref().map_or(1.0, |u| u.pixels_per_point),
        };
        if let Some(u) = ui.as_deref() {
            for (id, deltas) in &u.textures.set {
                for delta in deltas.iter() {
                    self.egui.update_texture(&gpu.device, &gpu.queue, *id, delta);
                }
            }
            self.egui.update_buffers(&gpu.device, &gpu.queue, &mut enc, &u.primitives, &screen);
        }
        // The glow: the sprites as soft blobs into the quarter-size buffer first.
        let glow = cam.bloom > 0.0 && !sprites.is_empty();
        if glow {
            let target = self.bloom.target(&gpu.device, size);
            let mut pass = enc.begin_render_pass(&wgpu::RenderPassDescriptor {
                label: Some("bloom splat"),
                color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                    view: &target.view,
                    depth_slice: None,
                    resolve_target: None,
                    ops: wgpu::Operations {
                        load: wgpu::LoadOp::Clear(wgpu::Color::BLACK),
                        store: wgpu::StoreOp::Store,
                    },
                })],
                depth_stencil_attachment: None,
                timestamp_writes: None,
                occlusion_query_set: None,
                multiview_mask: None,
            });
            self.sprites.draw_with(&mut pass, &self.sprites.bloom_pipeline, BLOOM_DOWNSCALE);
        }
        {
            let pass = enc.begin_render_pass(&wgpu::RenderPassDescriptor {
                label: Some("frame"),
                color_attachments: &[Some(wgpu::RenderPassColorAttachment {
                    view,
                    depth_slice: None,
                    resolve_target: None,
                    ops: wgpu::Operations { load: wgpu::LoadOp::Clear(BACKGROUND), store: wgpu::StoreOp::Store },
                })],
                depth_stencil_attachment: None,
                timestamp_writes: None,
                occlusion_query_set: None,
                multiview_mask: None,
            });
            let mut pass = pass.forget_lifetime();
            self.sprites.draw(&mut pass);
            if glow {
                if let Some(t) = &self.bloom.target {
                    pass.set_pipeline(&self.bloom.composite);
                    pass.set_bind_group(0, &t.group, &[]);
                    pass.draw(0..3, 0..1);
                }
            }
            if let Some(u) = ui.as_deref() {
                self.egui.render(&mut pass, &u.primitives, &screen);
            }
        }
        if let Some(u) = ui {
            for id in &u.textures.free {
                self.egui.free_texture(id);
            }
            // Applied: egui insists every delta is handled before it is dropped.
            u.textures.clear();
        }
        enc.finish()
    }
}

/// A texture to render into offscreen (`extra` adds usages such as COPY_SRC).
pub fn target_texture(
    gpu: &Gpu,
    format: wgpu::TextureFormat,
    size: (u32, u32),
    extra: wgpu::TextureUsages,
) -> wgpu::Texture {
    gpu.device.create_texture(&wgpu::TextureDescriptor {
        label: Some("offscreen"),
        size: wgpu::Extent3d { width: size.0, height: size.1, depth_or_array_layers: 1 },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format,
        usage: wgpu::TextureUsages::RENDER_ATTACHMENT | extra,
        view_formats: &[],
    })
}

/// A frame to write to a PNG some seconds after a window opened (`--capture-after S
/// --capture FILE`, for tests and scripts): taken once.
#[derive(Clone, Debug, Default)]
pub struct Capture {
    pub at: Option<(f64, std::path::PathBuf)>,
    taken: bool,
}

impl Capture {
    pub fn new(at: Option<(f64, std::path::PathBuf)>) -> Capture {
        Capture { at, taken: false }
    }

    /// Where to write, once the time has come (and never again).
    pub fn due(&mut self, started: std::time::Instant) -> Option<std::path::PathBuf> {
        let (t, path) = self.at.as_ref().filter(|_| !self.taken)?;
        (started.elapsed().as_secs_f64() >= *t).then(|| {
            self.taken = true;
            path.clone()
        })
    }
}

/// Renders the frame once more offscreen and writes it to `path` as a PNG (a capture or a
/// player's screenshot).
pub fn save_frame(
    gpu: &Gpu,
    renderer: &mut Renderer,
    size: (u32, u32),
    cam: &Camera,
    sprites: &[Sprite],
    ui: &mut EguiFrame,
    path: &std::path::Path,
) -> anyhow::Result<()> {
    let rgba = render_to_rgba(gpu, renderer, size, cam, sprites, Some(ui))?;
    write_png(path, size, &rgba)
}

/// Renders one frame offscreen and reads it back as tightly packed RGBA8 (sRGB).
pub fn render_to_rgba(
    gpu: &Gpu,
    renderer: &mut Renderer,
    size: (u32, u32),
    cam: &Camera,
    sprites: &[Sprite],
    ui: Option<&mut EguiFrame>,
) -> anyhow::Result<Vec<u8>> {
    let texture = target_texture(gpu, renderer.format, size, wgpu::TextureUsages::COPY_SRC);
    let view = texture.create_view(&Default::default());
    let cmd = renderer.render(gpu, &view, size, cam, sprites, ui);
    gpu.queue.submit([cmd]);
    read_texture(gpu, &texture, size)
}

/// Copies a texture back to the CPU (RGBA8 or BGRA8, returned as RGBA).
pub fn read_texture(gpu: &Gpu, texture: &wgpu::Texture, size: (u32, u32)) -> anyhow::Result<Vec<u8>> {
    let row = size.0 * 4;
    let padded = row.div_ceil(256) * 256;
    let buffer = gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("readback"),
        size: (padded * size.1) as u64,
        usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::MAP_READ,
        mapped_at_creation: false,
    });
    let mut enc = gpu.device.create_command_encoder(&Default::default());
    enc.copy_texture_to_buffer(
        wgpu::TexelCopyTextureInfo {
            texture,
            mip_level: 0,
            origin: wgpu::Origin3d::ZERO,
            aspect: wgpu::TextureAspect::All,
        },
        wgpu::TexelCopyBufferInfo {
            buffer: &buffer,
            layout: wgpu::TexelCopyBufferLayout {
                offset: 0,
                bytes_per_row: Some(padded),
                rows_per_image: Some(size.1),
            },
        },
        wgpu::Extent3d { width: size.0, height: size.1, depth_or_array_layers: 1 },
    );
    gpu.queue.submit([enc.finish()]);
    let slice = buffer.slice(..);
    slice.map_async(wgpu::MapMode::Read, |_| {});
    gpu.device
        .poll(wgpu::PollType::Wait { submission_index: None, timeout: None })
        .map_err(|e| anyhow!("GPU readback: {e}"))?;
    let data = slice.get_mapped_range().map_err(|e| anyhow!("GPU readback: {e:?}"))?;
    let bgra = matches!(texture.format(), wgpu::TextureFormat::Bgra8Unorm | wgpu::TextureFormat::Bgra8UnormSrgb);
    let mut out = Vec::with_capacity((row * size.1) as usize);
    for y in 0..size.1 as usize {
        let r = &data[y * padded as usize..y * padded as usize + row as usize];
        if bgra {
            for px in r.chunks_exact(4) {
                out.extend_from_slice(&[px[2], px[1], px[0], px[3]]);
            }
        } else {
            out.extend_from_slice(r);
        }
    }
    Ok(out)
}

/// Writes RGBA8 pixels as a PNG.
pub fn write_png(path: &std::path::Path, size: (u32, u32), rgba: &[u8]) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).ok();
    }
    let file = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), size.0, size.1);
    enc.set_color(png::ColorType::Rgba);
    enc.set_depth(png::BitDepth::Eight);
    let mut w = enc.write_header()?;
    w.write_image_data(rgba)?;
    Ok(())
}

/// Reads a PNG as RGBA8.
pub fn read_png(path: &std::path::Path) -> anyhow::Result<((u32, u32), Vec<u8>)> {
    let dec = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(path)?));
    let mut reader = dec.read_info()?;
    let mut buf = vec![0; reader.output_buffer_size().unwrap_or(0)];
    let info = reader.next_frame(&mut buf)?;
    buf.truncate(info.buffer_size());
    let rgba = match info.color_type {
        png::ColorType::Rgba => buf,
        png::ColorType::Rgb => buf.chunks_exact(3).flat_map(|p| [p[0], p[1], p[2], 255]).collect(),
        other => return Err(anyhow!("unsupported PNG colour type {other:?}")),
    };
    Ok(((info.width, info.height), rgba))
}

/// Draws a frame into a window's surface and presents it. Returns whether it was shown;
/// when the surface was lost or outdated it is configured again and the UI's texture
/// changes are kept in `pending` for the next frame.
#[allow(clippy::too_many_arguments)]
pub fn present(
    gpu: &Gpu,
    surface: &wgpu::Surface<'static>,
    config: &wgpu::SurfaceConfiguration,
    window: &winit::window::Window,
    renderer: &mut Renderer,
    cam: &Camera,
    sprites: &[Sprite],
    ui: &mut EguiFrame,
    pending: &mut egui::TexturesDelta,
) -> bool {
    let size = (config.width, config.height);
    match surface.get_current_texture() {
        wgpu::CurrentSurfaceTexture::Success(frame) | wgpu::CurrentSurfaceTexture::Suboptimal(frame) => {
            let view = frame.texture.create_view(&Default::default());
            let cmd = renderer.render(gpu, &view, size, cam, sprites, Some(ui));
            gpu.queue.submit([cmd]);
            window.pre_present_notify();
            gpu.queue.present(frame);
            true
        }
        wgpu::CurrentSurfaceTexture::Outdated | wgpu::CurrentSurfaceTexture::Lost => {
            surface.configure(&gpu.device, config);
            pending.append(std::mem::take(&mut ui.textures));
            false
        }
        _ => {
            pending.append(std::mem::take(&mut ui.textures));
            false
        }
    }
}

/// A window with its surface, renderer and egui state: what the game and the preview draw
/// into.
pub struct WindowGfx {
    pub window: std::sync::Arc<winit::window::Window>,
    pub gpu: Gpu,
    pub surface: wgpu::Surface<'static>,
    pub config: wgpu::SurfaceConfiguration,
    pub renderer: Renderer,
    pub egui_state: egui_winit::State,
}

impl WindowGfx {
    /// Opens a window with `attrs` and everything needed to draw into it.
    pub fn open(
        el: &winit::event_loop::ActiveEventLoop,
        attrs: winit::window::WindowAttributes,
        present_mode: wgpu::PresentMode,
        egui: &egui::Context,
    ) -> anyhow::Result<WindowGfx> {
        use anyhow::anyhow;
        let window = std::sync::Arc::new(el.create_window(attrs)?);
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let surface = instance
            .create_surface(window.clone())
            .map_err(|e| anyhow!("{NO_GPU_HINT}\n\n(cannot draw into the window: {e})"))?;
        let gpu = Gpu::with(instance, Some(&surface))?;
        let size = window.inner_size();
        let mut config = surface
            .get_default_config(&gpu.adapter, size.width.max(1), size.height.max(1))
            .ok_or_else(|| anyhow!("the graphics adapter cannot present to this window"))?;
        if let Some(f) = surface.get_capabilities(&gpu.adapter).formats.iter().find(|f| f.is_srgb()) {
            config.format = *f;
        }
        config.present_mode = present_mode;
        surface.configure(&gpu.device, &config);
        let renderer = Renderer::new(&gpu.device, config.format);
        let egui_state = egui_winit::State::new(
            egui.clone(),
            egui::ViewportId::ROOT,
            &window,
            Some(window.scale_factor() as f32),
            None,
            Some(gpu.device.limits().max_texture_dimension_2d as usize),
        );
        Ok(WindowGfx { window, gpu, surface, config, renderer, egui_state })
    }
}
