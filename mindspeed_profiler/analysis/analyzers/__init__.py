"""One module per question, each pure (parsed tables in, JSON-able rows out):

classify        what each trace event is (host op, annotation, runtime call, device activity)
communication   which device activity is communication (and how much of it is exposed)
breakdown       where the device time went: compute / communication / memory copy / idle
steps           the training steps in a capture and their device busy time
ops             the host ops by self time and by the device time they launched
kernels         the device kernels by total time (Kineto, Ascend kernel_details, Ascend db)
annotations     the user ranges (mstx / record_function) by total time
stages          the RL view of a timeline: time per stage per iteration, overlap, idle per worker
critical_path   the chain of stage spans that bounds each iteration
crossrank       the stage x rank table and the slow ranks
compare         what changed between two analyses
"""
