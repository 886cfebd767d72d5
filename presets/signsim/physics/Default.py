import bpy
physics = bpy.context.active_object.signsim.physics

physics.fingers_frequency = 8.0
physics.fingers_damping = 1.0
physics.thumb_frequency = 8.0
physics.thumb_damping = 1.0
physics.wrist_frequency = 6.0
physics.wrist_damping = 1.0
physics.forearm_frequency = 5.0
physics.forearm_damping = 1.0
physics.upper_arm_frequency = 5.0
physics.upper_arm_damping = 1.0
physics.clavicle_frequency = 4.0
physics.clavicle_damping = 1.0
physics.neck_head_frequency = 4.0
physics.neck_head_damping = 1.0
physics.feedforward = True
physics.contact_stiffness = 30000.0
physics.contact_damping = 20.0
physics.target_depth_mm = 0.2
physics.use_schedule = True
physics.max_substeps = '4'
