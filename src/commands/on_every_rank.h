// Owns how a command that runs on every rank ends on an error: an error the ranks agreed on is printed by each
// with its exit code; an error one rank met alone ends the whole job (other ranks may be waiting in a collective).
#pragma once
#include <functional>

#include "dist/world.h"

namespace ringtrain::commands {

int on_every_rank(dist::World& world, const std::function<int()>& body);  // body's exit code, or the error's

}  // namespace ringtrain::commands
