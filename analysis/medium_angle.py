"""The medium-angle annulus per probe position: a frame's electrons at ``inner_px`` < distance <=
``outer_px`` from the pattern centre ([analysis] centre_row, centre_col), the ring between the
shipped bright-field disk (66 px) and dark-field annulus (from 90 px). On when ``[analysis]
analyses`` lists "medium_angle" (with virtual_images on: it runs in the NodeGroups).

Computed in C++ by the NodeGroups' kernel of the same name (consumer/nodegroup/kernels/medium_angle.cpp),
as they count; its radii are fixed here, in its registration, handed to the kernel as its settings
and recorded as attributes of its dataset ([analysis] has no table per analysis to set them from)."""

from __future__ import annotations

from .registry import PER_POSITION, Analysis, Context, Output, register

SETTINGS = {"inner_px": 66.0, "outer_px": 90.0}


def _outputs(context: Context) -> list[Output]:
    return [Output(name="medium_angle", path="/analysis/medium_angle", per=PER_POSITION, dtype="float32",
                   unit="electrons", label=f"medium-angle annulus ({SETTINGS['inner_px']:g}-{SETTINGS['outer_px']:g} px)",
                   live="medium_angle", attrs={**SETTINGS, "centre_row": context.centre_row,
                                               "centre_col": context.centre_col})]


register(Analysis(name="medium_angle", summary="electrons in the medium-angle annulus around the pattern centre",
                  outputs=_outputs, settings=SETTINGS, nodegroup_kernel="medium_angle"))
