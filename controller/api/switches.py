"""Routes of switches: which the controller owns, and who holds which part of their memory."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from controller.api.context import ApiContext, context

router = APIRouter(tags=["switches"])
Ctx = Annotated[ApiContext, Depends(context)]


@router.get("/switches")
async def switches(ctx: Ctx) -> dict[str, Any]:
    """The switches and whether this controller is their primary client."""
    return {
        "switches": [
            {
                "device_id": c.spec.device_id,
                "name": c.spec.label,
                "address": c.spec.address,
                "connected": c.connected,
                "primary": c.is_primary,
            }
            for c in ctx.switches
        ]
    }


@router.get("/memory")
async def memory(ctx: Ctx) -> dict[str, Any]:
    """Per switch and memory pool: size, free units, and every segment with its owner."""
    return {"switches": ctx.manager.memory_view()}
