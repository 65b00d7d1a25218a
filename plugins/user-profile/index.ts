import { asClass } from 'awilix';
import { definePlugin } from 'rpc-service/plugin';
import { DEPS, type UserProfileDeps } from './deps.ts';
import * as operations from './operations.ts';
import { PROFILE_PICTURE, PROFILE_PICTURE_LIMITS, UserProfileService } from './user-profile.service.ts';

/** UserProfileRpc: the logged-in user's own profile, password, picture and channels; the records are the auth plugin's. */
export const userProfilePlugin = definePlugin<UserProfileDeps>({
  id: 'user-profile',
  group: 'UserProfileRpc',
  coreVersion: '^2.0.0',
  deps: DEPS,
  services: { userProfileService: asClass(UserProfileService).singleton() },
  operations,
  start: ({ uploadService }) => uploadService.definePurpose(PROFILE_PICTURE, PROFILE_PICTURE_LIMITS),
});
