# The texture demo's learnable-angle config with a warm-up of the angles' own: AngleWarmupHook holds
# them (learning rate 0) for the first 100 of the 300 iterations, while the rest of the network
# learns its first features; then they learn at 10 times the base rate like in the -la config.
# A variant tried by tools/analysis_tools/learnable_angles_study.py (docs/learnable.md).
_base_ = './oriented-convnext-demo-1d-la_upernet_1xb8-300iter_ade20k-textures-64x64.py'

custom_imports = dict(imports=['mmo1d'], allow_failed_imports=False)
custom_hooks = [
    dict(type='mmo1d.AngleLoggerHook', interval=50),
    dict(type='mmo1d.AngleWarmupHook', iters=100),
]
